"""The fresh tail's reach-back is bounded by its cap (issue 31): a sub-agent transcript (one
user message, the first, then tool calls) compacts to a context within the caps."""

from __future__ import annotations

import json

import pytest

from compaction.assembly import assemble_context
from compaction.engine import compact_conversation
from compaction.planning import Row, fresh_tail_start, stored_tokens
from compaction.rendering import MISSING_RESULT
from conversations.inputs import parse_message
from conversations.models import ContextItem, ItemType, SummaryMessage
from conversations.services import messages_append
from core.token_estimate import estimate

CAP = 4000
OUTPUT_MAX = 500
TASK = "Audit the cache layer: list every module under src/cache that misses a TTL check."


@pytest.fixture
def caps(settings):
    settings.LCM_TAIL_MAX_TOKENS = CAP
    settings.LCM_TAIL_TOOL_OUTPUT_MAX_TOKENS = OUTPUT_MAX
    settings.LCM_FRESH_TAIL_COUNT = 8


def _row(index: int, role: str | None, tokens: int = 10) -> Row:
    kind = ItemType.MESSAGE if role else ItemType.SUMMARY
    return Row(index, index, kind, index if role else None, None if role else "s", tokens, role, 0)


def _rows(roles: str, tokens: int = 10) -> list[Row]:
    names = {"u": "user", "a": "assistant", "t": "tool", "s": None}
    return [_row(i, names[r], tokens) for i, r in enumerate(roles)]


@pytest.mark.parametrize(
    ("roles", "tail_count", "cap", "start"),
    [
        ("uatatatat", 2, 1000, 0),  # within the cap: back to the user message
        ("uatatatat", 2, 50, 7),  # over it: the newest 2, starting on a call
        ("uatatatat", 3, 50, 5),  # the newest 3 would start on a result: its call too
        ("uaaatttat", 5, 50, 1),  # parallel calls: the whole run of calls and results
        ("uaaaaaaaa", 3, 50, 6),  # plain assistant messages: nothing to keep together
        ("satatat", 3, 20, 3),  # no user message left (compacted): the same boundary
        ("ustatat", 5, 20, 2),  # a result whose call was compacted: no further back
        ("uatatuat", 2, 30, 5),  # a later user message just before the newest 2, within cap
        ("uatatuat", 2, 20, 6),  # ... and over it
        ("uatat", 0, 10, 5),  # no tail count: an empty tail over the cap
        ("uatat", 0, 1000, 0),  # ... and the user message's stretch within it
    ],
)
def test_the_tail_reaches_the_user_message_only_within_its_cap(roles, tail_count, cap, start):
    rows = _rows(roles)
    assert fresh_tail_start(rows, tail_count, cap=cap, measure=stored_tokens) == start


def _call(n: int) -> dict:
    """A Write with a large input (the file the agent writes: its tokens count too)."""
    body = "\n".join(f"def handler_{n}_{k}(request): return cache.get(key_{k})" for k in range(26))
    return {
        "role": "assistant",
        "content": f"Writing src/cache/module_{n}.py",
        "parts": [
            {"part_type": "text", "text_content": f"Writing src/cache/module_{n}.py"},
            {
                "part_type": "tool",
                "tool_call_id": f"call_{n}",
                "tool_name": "Write",
                "tool_input": {"file_path": f"src/cache/module_{n}.py", "content": body},
            },
        ],
    }


def _output(n: int, lines: int) -> str:
    """A tool output of `lines` lines, with a recognisable head and tail."""
    found = [f"src/cache/module_{n}_{k}.py:{k}: value = cache.get(key_{k})" for k in range(lines)]
    return "\n".join([f"HEAD-{n} grep -rn ttl src/cache", *found, f"TAIL-{n} {lines} matches"])


def _result(n: int, lines: int) -> dict:
    output = _output(n, lines)
    part = {"part_type": "tool", "tool_call_id": f"call_{n}", "tool_output": output}
    return {"role": "tool", "content": output, "parts": [part]}


def _sub_agent(conversation, steps: int, lines: int = 45) -> None:
    """The task, then `steps` Write calls, each with a result of `lines` lines (45: ~620
    tokens, over OUTPUT_MAX)."""
    payloads = [{"role": "user", "content": TASK}]
    for n in range(steps):
        payloads += [_call(n), _result(n, lines)]
    messages_append(conversation_id=conversation.pk, messages=[parse_message(p) for p in payloads])


def _blocks(messages: list[dict], kind: str) -> list[dict]:
    return [
        block
        for message in messages
        if isinstance(message["content"], list)
        for block in message["content"]
        if block["type"] == kind
    ]


def _sent_tokens(messages: list[dict]) -> int:
    """The rendered blocks' text, tool inputs and results, estimated."""
    total = 0
    for message in messages:
        for block in message["content"]:
            body = block.get("text") or block.get("content") or json.dumps(block.get("input"))
            total += estimate(body)
    return total


def test_a_sub_agent_transcript_compacts_to_a_context_within_the_caps(conversation, caps):
    _sub_agent(conversation, 20)
    stored = sum(
        ContextItem.objects.filter(conversation=conversation).values_list("token_count", flat=True)
    )
    assert stored > 4 * CAP  # the whole transcript was the tail before

    compact_conversation(conversation_id=conversation.pk, mode="full")
    out = assemble_context(conversation=conversation, fmt="anthropic", split_summaries=True)

    messages = out.output["messages"]
    assert out.output["summaries"]  # the older steps were compacted
    assert _sent_tokens(messages) <= CAP
    assert out.tail_items >= 8 and len(messages) >= 2  # the newest 8 stay verbatim
    calls, results = _blocks(messages, "tool_use"), _blocks(messages, "tool_result")
    assert [c["id"] for c in calls] == [r["tool_use_id"] for r in results]  # pairing intact
    assert all(r["content"] != MISSING_RESULT for r in results)
    assert calls[-1]["id"] == "call_19" and calls[-1]["input"]["content"]  # inputs verbatim
    # The task left the tail: it is a source of the first summary (expand reaches it).
    assert SummaryMessage.objects.filter(
        conversation=conversation, message__seq=1, message__content=TASK
    ).exists()


def test_the_reach_back_is_measured_with_large_outputs_shortened(conversation, caps, settings):
    """Stored, the task and two steps are over the cap; sent (the older output as a
    reference) they fit: the task stays in the tail, verbatim, and nothing is compacted."""
    settings.LCM_FRESH_TAIL_COUNT = 2
    _sub_agent(conversation, 2, lines=135)
    stored = sum(
        ContextItem.objects.filter(conversation=conversation).values_list("token_count", flat=True)
    )
    assert stored > CAP

    compact_conversation(conversation_id=conversation.pk, mode="full")
    out = assemble_context(conversation=conversation, fmt="anthropic", split_summaries=True)

    assert out.output["summaries"] == []
    assert out.output["messages"][0]["content"][0]["text"] == TASK
    assert _sent_tokens(out.output["messages"]) <= CAP
