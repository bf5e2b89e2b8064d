"""The provider side of streaming durability: every wire event reaches the caller as a
JSON-serialisable RawEvent, in order, and those events alone rebuild the response."""

from __future__ import annotations

import json

import pytest

from providers.base import RawEvent
from providers.config import model_get
from providers.registry import provider_for
from providers.replay import response_from_raw_events
from tests.providers.helpers import TOOL, finished, make_request
from tests.support.fake_messages_api import anthropic_text_stream, anthropic_tool_use_stream
from tests.support.fake_responses_api import (
    responses_function_call_stream,
    responses_text_stream,
)


def journal_round_trip(events: list) -> list[tuple[str, dict]]:
    """What a JSONL journal gives back: each RawEvent serialised and parsed again."""
    lines = [
        json.dumps({"event_type": e.event_type, "payload": e.payload})
        for e in events
        if isinstance(e, RawEvent)
    ]
    return [(entry["event_type"], entry["payload"]) for entry in map(json.loads, lines)]


CASES = {
    "anthropic text": ("sonnet", anthropic_text_stream("one two three", chunks=3)),
    "anthropic tool": (
        "sonnet",
        anthropic_tool_use_stream("get_weather", {"city": "Oslo"}, text="Hm."),
    ),
    "anthropic dropped": ("sonnet", anthropic_text_stream("one two three", chunks=3, drop_after=5)),
    "openai text": ("gpt", responses_text_stream("one two three", chunks=3)),
    "openai tool": (
        "gpt",
        responses_function_call_stream("get_weather", {"city": "Oslo"}, text="Hm."),
    ),
    "openai dropped": ("gpt", responses_text_stream("one two three", chunks=3, drop_after=6)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_journaled_raw_events_rebuild_the_live_response(case, anthropic_env, openai_env):
    name, scripted = CASES[case]
    (anthropic_env if name == "sonnet" else openai_env).enqueue(scripted)
    spec = model_get(name)
    events = list(provider_for(spec).stream(make_request(spec, tools=[TOOL])))
    live = finished(events)

    rebuilt = response_from_raw_events(spec, live.raw_request, journal_round_trip(events))
    assert rebuilt.blocks == live.blocks
    assert rebuilt.items == live.items
    assert rebuilt.outcome["status"] == live.outcome["status"]
    assert rebuilt.usage == live.usage


def test_a_journal_cut_before_the_end_is_incomplete_with_the_text_so_far(anthropic_env):
    anthropic_env.enqueue(anthropic_text_stream("abcdef", chunks=3))
    spec = model_get("sonnet")
    events = list(provider_for(spec).stream(make_request(spec)))
    entries = journal_round_trip(events)[:5]  # message_start, ping, block start, 2 deltas
    rebuilt = response_from_raw_events(spec, {}, entries)
    assert rebuilt.outcome["status"] == "incomplete"
    assert rebuilt.outcome["reason"] == "connection_lost"
    assert [block["text"] for block in rebuilt.blocks] == ["abcd"]


def test_offline_streams_replay_too():
    spec = model_get("offline")
    events = list(provider_for(spec).stream(make_request(spec, "hi")))
    live = finished(events)
    entries = journal_round_trip(events)
    assert response_from_raw_events(spec, {}, entries).blocks == live.blocks
    cut = response_from_raw_events(spec, {}, entries[:3])
    assert cut.outcome["status"] == "incomplete"
    assert live.blocks[0]["text"].startswith(cut.blocks[0]["text"])
