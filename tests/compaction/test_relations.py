"""The statements of a span and the relation probes that measure summaries: pure functions on
a small session written in the stored text form of an imported agent transcript."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from compaction.summarizers import DeterministicSummarizer, SourceItem, SummaryRequest
from compaction.summarizers.fidelity import measure
from compaction.summarizers.handles import draw_handles
from compaction.summarizers.relations import check, draw_probes
from compaction.summarizers.render import render_sources
from compaction.summarizers.statements import draw_statements

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def call(name: str, call_id: str, given: dict) -> str:
    return f"[tool {name} {call_id}] " + json.dumps(given, sort_keys=True)


def session() -> list[SourceItem]:
    edit = {"file_path": "/repo/src/timeline.ts", "old_string": "timelineItems: enumOf(items)"}
    texts = [
        ("user", "Fix the timeline export, it fails on the enum. Keep the API stable."),
        ("assistant", call("Bash", "b1", {"command": "npm test"})),
        ("tool", "[tool Bash b1]\nError: TypeError: timelineItems is not a valid enum"),
        (
            "assistant",
            "The timelineItems block is what breaks the schema, so I'll remove it.\n"
            + call("Edit", "e1", {**edit, "new_string": "items: listOf(items)"}),
        ),
        ("tool", "[tool Edit e1]\nThe file was updated."),
        ("assistant", call("Bash", "b2", {"command": "npm test"})),
        ("tool", "[tool Bash b2]\n42 passing"),
        (
            "assistant",
            "The fetch is too slow (80+ min projected). "
            "I'll switch to GraphQL search, chunked by week, instead of the REST pages.",
        ),
        ("assistant", call("Bash", "b3", {"command": "node fetch.js"})),
        ("tool", "[tool Bash b3]\nTypeError: handler is not a function"),
        (
            "assistant",
            call(
                "TodoWrite",
                "t1",
                {"todos": [{"content": "PostHog 90d data fetch", "status": "in_progress"}]},
            ),
        ),
    ]
    return [
        SourceItem(
            ref=f"msg:{n + 1}",
            kind="message",
            content=text,
            created_at=T0 + timedelta(minutes=n),
            role=role,
        )
        for n, (role, text) in enumerate(texts)
    ]


def test_statements_say_what_happened_with_their_sources():
    said = {(s.kind, s.text): s.refs for s in draw_statements(session())}
    texts = "\n".join(text for _, text in said)

    assert '"Fix the timeline export, it fails on the enum. Keep the API stable."' in texts
    assert "timeline.ts edited (`listOf`, `timelineItems`, `enumOf`)" in texts
    assert "so I'll remove it" in texts  # the purpose the assistant wrote before the edit
    fixed = next(t for k, t in said if k == "error" and "not a valid enum" in t)
    assert "fixed by editing timeline.ts" in fixed
    assert said[("error", fixed)] == ("msg:2", "msg:6")  # the failing run, then the passing one
    open_error = next(t for k, t in said if k == "error" and "handler is not a function" in t)
    assert "still open" in open_error
    decision = next(t for k, t in said if k == "decision")
    assert "too slow" in decision and "instead of the REST pages" in decision
    assert any(k == "task" and "PostHog 90d data fetch" in t for k, t in said)
    statements = draw_statements(session())
    assert statements == draw_statements(session())  # deterministic
    assert all(s.refs and s.features.score >= 0 for s in statements)


def test_probes_hold_in_a_statement_and_not_in_a_list_of_the_same_names():
    probes = draw_probes(session())
    kinds = [probe.kind for probe in probes]
    assert kinds.count("file") == 1 and kinds.count("error") == 2
    assert {"request", "decision", "pending"} <= set(kinds)

    handles = draw_handles(session())
    names = "\n".join(
        f"{kind}: {', '.join(name.replace(' ', '_') for name in names)}"
        for kind, names in handles.items()
        if kind != "decision"
    )
    account = (
        "Asked:\n"
        '- "Fix the timeline export, it fails on the enum" (msg:1), not finished\n'
        "Changed:\n- timeline.ts: replaced `timelineItems` with `items` (msg:4)\n"
        "Errors and outcomes:\n"
        "- TypeError: timelineItems is not a valid enum: fixed by editing timeline.ts\n"
        "- TypeError: handler is not a function: still open\n"
        "Decided:\n- switch to GraphQL search, chunked by week, instead of the REST pages\n"
        "Open:\n- PostHog 90d data fetch (in progress)\n"
    )

    assert check(names, probes).score == 0.0
    assert check(account, probes).score == 1.0
    assert check(render_sources(request(session())), probes).score < 1.0  # the raw span
    missed = check("The assistant worked on timeline.ts.", probes)
    assert missed.missed["file"] == ["/repo/src/timeline.ts"]
    assert missed.unheld[0].ask().startswith("file /repo/src/timeline.ts: how it changed")


def request(sources, target=600) -> SummaryRequest:
    return SummaryRequest(sources=sources, depth=0, target_tokens=target, level="normal")


def test_the_deterministic_summary_holds_the_probes_and_names_the_handles():
    sources = session()
    content = DeterministicSummarizer().summarize(request(sources, target=400)).content

    assert check(content, draw_probes(sources)).score == 1.0
    assert measure(content, draw_handles(sources)).score >= 0.9
    for heading in ("Asked:", "Changed:", "Errors and outcomes:", "Decided:", "Open:"):
        assert heading in content.splitlines()
