"""The compaction addendum: what an agent's own summary dropped, said as what happened, in a
token budget. Pure functions on a small session in the stored text form of an imported
agent transcript (tests/compaction/test_relations.py writes the same shape)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from compaction.summarizers import SourceItem
from compaction.summarizers.addendum import draw_addendum
from compaction.summarizers.relations import _names_only
from core.token_estimate import estimate

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
HEADER = "[lcm] What your summary left out (sum_0123456789abcdef):"


def call(name: str, call_id: str, given: dict) -> str:
    return f"[tool {name} {call_id}] " + json.dumps(given, sort_keys=True)


def session() -> list[SourceItem]:
    edit = {"file_path": "/repo/src/timeline.ts", "old_string": "timelineItems: enumOf(items)"}
    texts = [
        ("user", "Fix the timeline export, it fails on the enum. Keep the page size at 250."),
        ("assistant", call("Read", "r1", {"file_path": "/repo/docs/export-notes.md"})),
        ("tool", "[tool Read r1]\n# Export notes"),
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


# What an agent's own summary often is: the goal, and nothing of what happened on the way.
THIN_SUMMARY = "The user wants the timeline export fixed. Work is in progress."


def test_it_says_what_the_summary_dropped_as_what_happened_with_the_messages_it_comes_from():
    addendum = draw_addendum(
        session(), THIN_SUMMARY, budget=1_500, estimator=estimate, header=HEADER
    )

    lines = addendum.text.splitlines()
    assert lines[0] == HEADER
    text = addendum.text
    # which file changed how, which error was fixed by what, which is still open
    assert "fixed by editing timeline.ts (`listOf`" in text
    assert "TypeError: handler is not a function" in text and "still open" in text
    assert "`export-notes.md` read, not changed" in text
    # what the user asked, in the user's words; the choice with its reason
    assert 'The user asked: "Fix the timeline export' in text
    assert "instead of the REST pages" in text and "too slow" in text
    assert "Open: task (in_progress): PostHog 90d data fetch" in text
    assert "250" in text  # the number the user gave
    # every line after the header names the messages it comes from
    assert all("(msg:" in line for line in lines[1:] if not line.startswith("- Also"))
    assert addendum.before.score < 0.5
    assert addendum.after.score == 1.0
    assert addendum.relations_after.score == 1.0
    assert addendum.tokens == estimate(text) <= 1_500


def test_it_is_not_a_list_of_names():
    addendum = draw_addendum(
        session(), THIN_SUMMARY, budget=1_500, estimator=estimate, header=HEADER
    )
    statement_lines = [i.text for i in addendum.items if i.kind != "closing"]
    assert statement_lines
    assert not any(_names_only(line.lower()) for line in statement_lines)


def test_what_the_summary_already_says_is_not_repeated():
    full = draw_addendum(session(), THIN_SUMMARY, budget=1_500, estimator=estimate, header=HEADER)
    thorough = THIN_SUMMARY + "\n" + "\n".join(i.text for i in full.items)
    again = draw_addendum(session(), thorough, budget=1_500, estimator=estimate, header=HEADER)
    assert again.before.score == 1.0
    assert again.text == "" and again.items == [] and again.tokens == 0


def test_a_small_budget_keeps_what_matters_most_and_stays_within_it():
    for budget in (60, 120, 250):
        addendum = draw_addendum(
            session(), THIN_SUMMARY, budget=budget, estimator=estimate, header=HEADER
        )
        assert addendum.tokens <= budget
    small = draw_addendum(session(), THIN_SUMMARY, budget=120, estimator=estimate, header=HEADER)
    large = draw_addendum(session(), THIN_SUMMARY, budget=1_500, estimator=estimate, header=HEADER)
    assert small.after.score < large.after.score
    assert small.after.score > small.before.score


def test_it_is_deterministic():
    first = draw_addendum(session(), THIN_SUMMARY, budget=300, estimator=estimate, header=HEADER)
    second = draw_addendum(session(), THIN_SUMMARY, budget=300, estimator=estimate, header=HEADER)
    assert first.text == second.text and first.as_dict() == second.as_dict()
