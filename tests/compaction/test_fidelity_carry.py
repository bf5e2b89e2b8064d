"""Handles carried up the summary DAG: a depth-2 summary still names the files, commands and
errors of the messages under its grandchildren, within its target, byte for byte the same
on every run. Pure: the engine's carry-up (children's drawn handles) done by hand."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from compaction.engine import compact_conversation
from compaction.summarizers import DeterministicSummarizer, SourceItem, SummaryRequest
from compaction.summarizers.base import Handles
from compaction.summarizers.fidelity import measure
from compaction.summarizers.handles import draw_handles
from conversations.models import Summary, SummaryMessage, SummaryParent
from core.token_estimate import estimate_tokens
from tests.compaction.helpers import T0
from tests.factories import append_messages

_AREAS = ("billing", "search", "auth", "export", "sync", "audit", "mail", "jobs")
_PROGRAMS = ("git rebase", "npm test", "cargo build", "docker compose", "make lint", "pytest")
_ERRORS = ("KeyError", "TimeoutError", "PermissionError", "ValueError", "HTTP 502", "OSError")


def _call(call_id: str, given: dict) -> str:
    return f"[tool Bash {call_id}] " + json.dumps(given, sort_keys=True)


def _session(n: int) -> list[SourceItem]:
    """One leaf's messages: two files, a command that fails with a named error, and long
    prose full of identifiers and decisions competing for the summary's room."""
    area, program, error = _AREAS[n % 8], _PROGRAMS[n % 6], _ERRORS[n % 6]
    prose = " ".join(
        f"We decided to keep `{area}_handler_{n}_{k}` instead of `legacy_{area}_{k}` because "
        f"the `{area.title()}Client{k}.retry()` path was flaky."
        for k in range(6)
    )
    texts = [
        ("user", f"Part {n}: the {area} service breaks when {area}/config_{n}.yaml is reloaded."),
        ("assistant", prose + "\n" + _call(f"c{n}a", {"file_path": f"/repo/{area}/api_{n}.py"})),
        ("tool", f"[tool Read c{n}a]\n    1\timport os"),
        ("assistant", _call(f"c{n}b", {"command": f"cd /repo && {program} --part {n}"})),
        ("tool", f"[tool Bash c{n}b]\nExit code 1\nE   {error}: part {n} failed"),
    ]
    return [
        SourceItem(
            ref=f"msg:{n * 10 + i}",
            kind="message",
            content=text,
            created_at=T0 + timedelta(minutes=n * 10 + i),
            role=role,
        )
        for i, (role, text) in enumerate(texts)
    ]


def _summarize(sources, handles: Handles, depth: int, target: int) -> SourceItem:
    request = SummaryRequest(
        sources=sources, depth=depth, target_tokens=target, level="normal", handles=handles
    )
    content = DeterministicSummarizer().summarize(request).content
    assert estimate_tokens(content) <= target
    return SourceItem(
        ref=f"sum_{depth}{sources[0].ref.replace(':', '')}".ljust(20, "0"),
        kind="summary",
        content=content,
        created_at=sources[0].created_at,
        latest_at=sources[-1].created_at,
    )


def _condense(children: list[tuple[SourceItem, Handles]], depth: int, target: int):
    """A condensed summary over `children` with their drawn handles, as the engine does."""
    sources = [child for child, _ in children]
    handles = draw_handles(sources, carried=[drawn for _, drawn in children])
    return _summarize(sources, handles, depth, target), handles


def _depth_two(leaf: int, condensed: int) -> tuple[SourceItem, list[SourceItem]]:
    """16 leaves (600 tokens each, the default) under 4 depth-1 summaries under one depth-2;
    and the messages under it."""
    messages, leaves = [], []
    for n in range(16):
        session = _session(n)
        messages += session
        drawn = draw_handles(session)
        leaves.append((_summarize(session, drawn, 0, leaf), drawn))
    middle = [_condense(leaves[i : i + 4], 1, condensed) for i in range(0, 16, 4)]
    top, _ = _condense(middle, 2, condensed)
    return top, messages


@pytest.mark.parametrize("leaf, condensed", [(600, 900), (200, 300)])
def test_a_depth_2_summary_names_its_grandchildren_s_files_commands_and_errors(leaf, condensed):
    top, messages = _depth_two(leaf, condensed)
    below = draw_handles(messages)
    assert len(below["file"]) == 32 and len(below["error"]) == 6  # what the messages hold

    kept = measure(top.content, below).kept

    assert kept["file"] == [32, 32]
    assert kept["command"] == [len(below["command"])] * 2
    assert kept["error"] == [6, 6]
    assert estimate_tokens(top.content) <= condensed


def test_carrying_up_is_deterministic_to_the_byte():
    assert _depth_two(600, 900)[0].content == _depth_two(600, 900)[0].content


def _payload(i: int) -> dict:
    item = _session(i // 5)[i % 5]
    return {"role": item.role, "content": item.content, "created_at": item.created_at.isoformat()}


def test_the_engine_s_depth_2_summary_names_what_its_grandchildren_s_messages_touched(
    conversation, settings
):
    settings.LCM_LEAF_CHUNK_TOKENS = 1_000
    settings.LCM_LEAF_TARGET_TOKENS = 300
    settings.LCM_CONDENSED_TARGET_TOKENS = 900  # the default
    settings.LCM_LEAF_MIN_FANOUT = settings.LCM_CONDENSED_MIN_FANOUT = 3
    messages = append_messages(conversation, 5 * 36, payload=_payload)

    result = compact_conversation(conversation_id=conversation.pk, mode="full")

    top = Summary.objects.filter(pk__in=result.summaries_created, depth=2).first()
    assert top is not None and top.token_count <= 900
    under = SummaryMessage.objects.filter(summary__in=_leaves_under(top))
    ids = set(under.values_list("message_id", flat=True))
    below = draw_handles([SourceItem.of_message(m) for m in messages if m.pk in ids])
    kept = measure(top.content, below).kept
    assert kept["file"][1] >= 30 and kept["file"][0] == kept["file"][1]
    assert kept["command"][0] == kept["command"][1] == len(_PROGRAMS)
    assert kept["error"][0] == kept["error"][1] == len(_ERRORS)


def _leaves_under(summary: Summary) -> list[str]:
    frontier, leaves = [summary.pk], []
    while frontier:
        links = SummaryParent.objects.filter(summary_id__in=frontier)
        frontier = list(links.values_list("parent_summary_id", flat=True))
        leaves += list(
            Summary.objects.filter(pk__in=frontier, kind="leaf").values_list("pk", flat=True)
        )
    return leaves
