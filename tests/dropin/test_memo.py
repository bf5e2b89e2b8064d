"""Per-message work remembered across requests (dropin/memo.py): a remembered parse, chain
step or token share is what computing it afresh gives, and a history that changed anywhere
is still told apart (a session whose earlier message changed still forks)."""

from __future__ import annotations

import json

import pytest

from dropin import memo, services
from dropin.models import Thread
from dropin.wires import anthropic as wire
from tests.support.fake_messages_api import message

BASH = {"name": "Bash", "description": "Run a command.", "input_schema": {"type": "object"}}


def _session(session: str) -> dict:
    return {"user_id": json.dumps({"device_id": "0", "session_id": session})}


MESSAGES = [
    {"role": "user", "content": "Tidy the project, s'il vous plaît: 整理 🧹"},
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Look first.", "signature": "sig-1"},
            {"type": "text", "text": "Listing."},
            {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}},
        ],
    },
    {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_1",
                "content": [{"type": "text", "text": "a.py\nb.py"}],
            },
            {"type": "text", "text": "and the images?", "cache_control": {"type": "ephemeral"}},
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": "AA"},
            },
        ],
    },
    {"role": "system", "content": "A reminder in the middle."},
    {"role": "assistant", "content": [{"type": "server_tool_use", "id": "srv_1", "input": {}}]},
    {"role": "user", "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]},
]


def _body(messages: list[dict]) -> dict:
    return {"model": "claude-x", "max_tokens": 10, "messages": messages, "tools": [BASH]}


def _figures(messages: list[dict]) -> tuple[list[str], int]:
    parsed = wire.parse(_body(messages))
    return services.chain("", parsed.messages), services.request_total(parsed)


def _without_memo(messages: list[dict]) -> tuple[list[str], int]:
    parsed = wire.parse(_body(messages))
    for item in parsed.messages:
        item.pop("memo", None)
    tokens = services.request_tokens(parsed.system, parsed.messages, parsed.tools)
    return services.chain("", parsed.messages), tokens


def test_a_remembered_message_gives_what_computing_it_afresh_gives():
    memo.clear()
    fresh = _without_memo(MESSAGES)
    first = _figures(MESSAGES)  # misses: computed and remembered
    again = _figures(MESSAGES)  # hits
    assert first == fresh and again == fresh
    assert memo.entry(memo.key(wire.WIRE, MESSAGES[1])[0]) is not None


def test_values_python_holds_equal_are_still_different_messages():
    memo.clear()
    as_int = [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t", "content": "x", "is_error": 1}]}]  # fmt: skip
    as_bool = [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t", "content": "x", "is_error": True}]}]  # fmt: skip
    assert as_int == as_bool  # to Python, not to JSON
    # A tool call's input is not part of its identity (its id is), but it is part of the
    # tokens sent: a remembered int input must not stand for the same input as floats.
    int_input = [{"role": "user", "content": "go"}, {"role": "assistant", "content": [
        {"type": "tool_use", "id": "t", "name": "Bash", "input": {"n": [1] * 40}}]}]  # fmt: skip
    float_input = [{"role": "user", "content": "go"}, {"role": "assistant", "content": [
        {"type": "tool_use", "id": "t", "name": "Bash", "input": {"n": [1.5 - 0.5] * 40}}]}]  # fmt: skip
    assert int_input == float_input
    first = _figures(int_input)
    second = _figures(float_input)
    assert first[1] < second[1]
    assert first == _without_memo(int_input) and second == _without_memo(float_input)
    assert memo.key(wire.WIRE, as_int[0])[0] != memo.key(wire.WIRE, as_bool[0])[0]


def test_a_changed_early_message_changes_every_later_hash():
    memo.clear()
    hashes, _ = _figures(MESSAGES)
    changed = [dict(MESSAGES[0], content="Tidy the other project"), *MESSAGES[1:]]
    other, _ = _figures(changed)
    assert other[0] == hashes[0]
    assert all(a != b for a, b in zip(hashes[1:], other[1:], strict=True))
    assert other == _without_memo(changed)[0]


def test_merged_messages_are_not_taken_for_either_one():
    memo.clear()
    parsed = wire.parse(_body([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]))
    assert len(parsed.messages) == 1 and "memo" not in parsed.messages[0]


def test_the_memo_stays_within_its_bound(monkeypatch):
    memo.clear()
    monkeypatch.setattr(memo, "MAX_BYTES", 200)
    for n in range(20):
        wire.parse(_body([{"role": "user", "content": f"message {n} " + "x" * 40}]))
    assert 0 < memo._bytes <= 200
    assert (
        memo.entry(memo.key(wire.WIRE, {"role": "user", "content": "message 0 " + "x" * 40})[0])
        is None
    )
    memo.clear()


@pytest.mark.django_db(transaction=True)
def test_a_session_whose_earlier_message_changed_still_forks(upstreams, claude):
    upstreams.messages.enqueue(message("first"), message("second"), message("third"))
    history = [{"role": "user", "content": "remember quux"}]
    claude.messages.create(
        model="claude-x", max_tokens=100, messages=history, tools=[BASH],
        metadata=_session("memo-1"),
    )  # fmt: skip
    history += [{"role": "assistant", "content": "first"}, {"role": "user", "content": "more"}]
    kept = claude.messages.with_raw_response.create(
        model="claude-x", max_tokens=100, messages=history, tools=[BASH],
        metadata=_session("memo-1"),
    )  # fmt: skip
    assert kept.headers["X-LCM-Forked"] == "false"
    edited = [
        {"role": "user", "content": "remember quuz"},
        *history[1:],
    ]  # every later part as before
    edited += [{"role": "assistant", "content": "second"}, {"role": "user", "content": "again"}]
    forked = claude.messages.with_raw_response.create(
        model="claude-x", max_tokens=100, messages=edited, tools=[BASH],
        metadata=_session("memo-1"),
    )  # fmt: skip
    assert forked.headers["X-LCM-Forked"] == "true"
    child = Thread.objects.get(key="session:memo-1", active=True)
    assert child.parent is not None and child.fork_position == 0
    assert child.message_count == len(edited) + 1
