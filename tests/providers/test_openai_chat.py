"""The OpenAI Chat Completions adapter (`openai_chat`) through the real `openai` SDK against
the fake Chat Completions server over local HTTP."""

from __future__ import annotations

import pytest

from providers import blocks
from providers.base import RawEvent, TextDelta, ToolCallDelta, ToolCallStart
from providers.config import model_get
from providers.errors import MissingKey, ProviderAuthError, ToolOrderingError
from providers.registry import provider_for
from providers.replay import response_from_raw_events
from tests.providers.helpers import TOOL, finished, make_request
from tests.support.fake_chat_completions_api import (
    chat_completion,
    chat_error,
    chat_rate_limited,
    chat_text_stream,
    chat_tool_call_stream,
    tool_call,
)


@pytest.fixture
def local(openai_chat_env):
    return model_get("local")


def run(spec, request=None, **kwargs) -> list:
    return list(provider_for(spec, **kwargs).stream(request or make_request(spec)))


def test_a_text_stream_gives_deltas_usage_and_a_completed_outcome(openai_chat_env, local):
    openai_chat_env.enqueue(
        chat_text_stream("hello world", chunks=3, prompt_tokens=40, cached_tokens=32)
    )
    events = run(local)

    assert [e.text for e in events if isinstance(e, TextDelta)] == ["hell", "o wo", "rld"]
    raw = [e for e in events if isinstance(e, RawEvent)]
    assert {e.event_type for e in raw} == {"chat.completion.chunk"}
    assert len(raw) == 6  # role, 3 deltas, finish, usage ([DONE] is not an event)
    response = finished(events)
    assert response.blocks == [blocks.text("hello world")]
    assert response.outcome["status"] == "completed"
    assert response.usage == {
        "input_tokens": 40,
        "output_tokens": 5,
        "cache_read_input_tokens": 32,
        "cache_creation_input_tokens": None,
    }
    sent = openai_chat_env.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-test-chat-key"
    assert sent.body["stream"] is True
    assert sent.body["stream_options"] == {"include_usage": True}
    assert sent.body["model"] == "llama-fake"
    assert sent.body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hello"},
    ]
    assert sent.body["max_completion_tokens"] == 256


def test_a_tool_call_stream_pauses_with_the_parsed_call(openai_chat_env, local):
    openai_chat_env.enqueue(
        chat_tool_call_stream("get_weather", {"city": "Paris"}, call_id="call_1", text="Let me")
    )
    events = run(local, make_request(local, tools=[TOOL]))

    starts = [e for e in events if isinstance(e, ToolCallStart)]
    assert [(s.index, s.call_id, s.name) for s in starts] == [(1, "call_1", "get_weather")]
    assert "".join(e.partial_json for e in events if isinstance(e, ToolCallDelta)) == (
        '{"city": "Paris"}'
    )
    response = finished(events)
    assert response.outcome["status"] == "paused"
    assert response.blocks == [
        blocks.text("Let me"),
        blocks.tool_use("call_1", "get_weather", {"city": "Paris"}),
    ]
    sent = openai_chat_env.requests[0].body
    assert sent["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "The weather in a city.",
                "parameters": TOOL["input_schema"],
            },
        }
    ]
    assert sent["tool_choice"] == "auto"
    assert sent["parallel_tool_calls"] is False


def test_tool_results_images_and_assistant_calls_go_out_on_the_chat_wire(openai_chat_env, local):
    openai_chat_env.enqueue(chat_completion("sunny"))
    history = [
        blocks.message(
            "user",
            [
                blocks.text("weather?"),
                blocks.image(
                    "image/png", {"type": "base64", "media_type": "image/png", "data": "AAA"}
                ),
            ],
        ),
        blocks.message("assistant", [blocks.tool_use("call_9", "get_weather", {"city": "Oslo"})]),
        blocks.message(
            "user", [blocks.text("thanks"), blocks.tool_result("call_9", "rain", is_error=False)]
        ),
    ]
    response = provider_for(local).complete(make_request(local, messages=history, tools=[TOOL]))

    assert response.blocks == [blocks.text("sunny")]
    assert response.usage == {
        "input_tokens": 12,
        "output_tokens": 5,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": None,
    }
    assert openai_chat_env.requests[0].body["messages"][1:] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "weather?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA"}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_9",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_9", "content": "rain"},
        {"role": "user", "content": "thanks"},
    ]


def test_a_json_answer_with_tool_calls_maps_to_tool_use_blocks(openai_chat_env, local):
    openai_chat_env.enqueue(chat_completion(None, tool_calls=[tool_call("f", {"a": 1}, "c1")]))
    response = provider_for(local).complete(make_request(local, tools=[TOOL]))
    assert response.blocks == [blocks.tool_use("c1", "f", {"a": 1})]
    assert response.outcome["status"] == "paused"


def test_length_and_dropped_streams_end_incomplete_keeping_the_text(openai_chat_env, local):
    openai_chat_env.enqueue(chat_text_stream("abcdef", chunks=3).dropped_after(3))
    response = finished(run(local))
    assert response.outcome["status"] == "incomplete"
    assert response.outcome["reason"] == "connection_lost"
    assert response.blocks == [blocks.text("abcd")]


def test_auth_and_rate_limit_errors_are_mapped_and_retried(openai_chat_env, local):
    sleeps: list[float] = []
    openai_chat_env.enqueue(chat_rate_limited(retry_after=0.5), chat_text_stream("ok"))
    response = finished(run(local, sleep=sleeps.append, max_retries=2))
    assert response.blocks == [blocks.text("ok")]
    assert sleeps == [0.5]

    openai_chat_env.enqueue(chat_error(401, "invalid_request_error", "invalid_api_key", "bad key"))
    with pytest.raises(ProviderAuthError) as caught:
        run(local)
    assert caught.value.code == "invalid_api_key"
    assert caught.value.status == 401


def test_a_missing_key_names_the_variable(openai_chat_env, local, monkeypatch):
    monkeypatch.delenv("OPENAI_CHAT_API_KEY")
    with pytest.raises(MissingKey) as caught:
        run(local)
    assert caught.value.variable == "OPENAI_CHAT_API_KEY"
    assert openai_chat_env.requests == []


def test_a_broken_tool_order_is_refused_before_sending(openai_chat_env, local):
    history = [blocks.message("user", [blocks.tool_result("nope", "x")])]
    with pytest.raises(ToolOrderingError):
        run(local, make_request(local, messages=history))
    assert openai_chat_env.requests == []


def test_a_journaled_stream_replays_to_the_same_response(openai_chat_env, local):
    openai_chat_env.enqueue(chat_tool_call_stream("get_weather", {"city": "Rome"}, text="ok"))
    events = run(local, make_request(local, tools=[TOOL]))
    live = finished(events)
    replayed = response_from_raw_events(
        local,
        live.raw_request,
        [(e.event_type, e.payload) for e in events if isinstance(e, RawEvent)],
    )
    assert replayed.blocks == live.blocks
    assert replayed.outcome == live.outcome
    assert replayed.usage == live.usage


def test_the_model_config_accepts_the_chat_provider_with_its_own_variables(openai_chat_env):
    spec = model_get("local")
    assert (spec.provider, spec.api_key_env, spec.base_url_env) == (
        "openai_chat",
        "OPENAI_CHAT_API_KEY",
        "OPENAI_CHAT_BASE_URL",
    )
    assert spec.context_limit == 8000
