"""The Anthropic Messages adapter through the real `anthropic` SDK against the fake API
speaking the streaming protocol over local HTTP."""

from __future__ import annotations

import logging

import pytest

from providers import blocks
from providers.base import RawEvent, TextDelta, ToolCallDelta, ToolCallStart
from providers.config import model_get
from providers.errors import (
    MissingKey,
    ProviderAuthError,
    ProviderError,
    ProviderUnavailable,
    ToolOrderingError,
)
from providers.registry import provider_for
from tests.providers.helpers import TOOL, finished, make_request
from tests.support.fake_messages_api import (
    FakeMessagesAPI,
    anthropic_error_stream,
    anthropic_stream,
    anthropic_text_stream,
    anthropic_tool_use_stream,
    authentication_error,
    error,
    message,
    overloaded,
    rate_limited,
    redacted_thinking_block,
    server_error,
    text_block,
    thinking_block,
    tool_use_block,
)


@pytest.fixture
def sonnet(anthropic_env):
    return model_get("sonnet")


def run(spec, request=None, **kwargs) -> list:
    return list(provider_for(spec, **kwargs).stream(request or make_request(spec)))


def test_a_text_stream_yields_every_wire_event_the_deltas_and_one_finished(anthropic_env, sonnet):
    anthropic_env.enqueue(anthropic_text_stream("hello world", chunks=3))
    events = run(sonnet)

    raw = [e.event_type for e in events if isinstance(e, RawEvent)]
    assert raw == [
        "message_start",
        "ping",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["hell", "o wo", "rld"]
    assert {e.index for e in events if isinstance(e, TextDelta)} == {0}
    response = finished(events)
    assert response.blocks == [blocks.text("hello world")]
    assert response.items == [{"kind": "assistant_message", "blocks": [blocks.text("hello world")]}]
    assert response.outcome == {
        "status": "completed",
        "reason": "end_turn",
        "code": None,
        "message": None,
    }
    assert response.usage == {
        "input_tokens": 100,
        "output_tokens": 20,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
    }
    assert response.model == "claude-fake-1"
    assert response.raw_response["stop_reason"] == "end_turn"
    assert response.raw_response["content"] == [{"type": "text", "text": "hello world"}]


def test_the_request_has_a_top_level_system_and_no_sampling_parameters(anthropic_env, sonnet):
    anthropic_env.enqueue(anthropic_text_stream("ok"))
    response = finished(run(sonnet, make_request(sonnet, "hi", system="You are terse.")))

    [sent] = anthropic_env.requests
    assert sent.headers["authorization"] == "Bearer sk-ant-test-key"
    assert sent.body == {
        "model": "claude-sonnet-5-5",
        "max_tokens": 256,
        "system": "You are terse.",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
    }
    assert response.raw_request == sent.body  # exactly what was sent, no key, no headers
    assert all(m["role"] in ("user", "assistant") for m in sent.body["messages"])


def test_tools_are_sent_with_disable_parallel_tool_use_from_config(anthropic_env, sonnet):
    anthropic_env.enqueue(anthropic_text_stream("a"), anthropic_text_stream("b"))
    run(sonnet, make_request(sonnet, tools=[TOOL]))
    run(sonnet, make_request(sonnet, tools=[TOOL], options={"parallel_tool_calls": True}))

    first, second = (r.body for r in anthropic_env.requests)
    assert first["tools"] == [TOOL]
    assert first["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    assert second["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": False}


def test_the_anthropic_table_of_the_config_file_sets_parallel_tool_use(
    anthropic_env, tmp_path, monkeypatch
):
    config = tmp_path / "config.toml"
    config.write_text("[anthropic]\ndisable_parallel_tool_use = false\n")
    monkeypatch.setenv("LCM_CONFIG_FILE", str(config))
    anthropic_env.enqueue(anthropic_text_stream("a"))
    spec = model_get("sonnet")
    run(spec, make_request(spec, tools=[TOOL]))
    assert anthropic_env.requests[0].body["tool_choice"]["disable_parallel_tool_use"] is False


def test_a_tool_use_stop_pauses_with_the_call_streamed_by_index(anthropic_env, sonnet):
    anthropic_env.enqueue(
        anthropic_tool_use_stream(
            "get_weather", {"city": "Paris"}, id="toolu_01", text="Let me check.", chunks=3
        )
    )
    events = run(sonnet, make_request(sonnet, tools=[TOOL]))

    starts = [e for e in events if isinstance(e, ToolCallStart)]
    assert starts == [ToolCallStart(1, "toolu_01", "get_weather")]
    pieces = [e.partial_json for e in events if isinstance(e, ToolCallDelta)]
    assert len(pieces) == 3 and "".join(pieces) == '{"city": "Paris"}'
    assert {e.index for e in events if isinstance(e, ToolCallDelta)} == {1}
    response = finished(events)
    assert response.outcome["status"] == "paused"
    assert response.outcome["reason"] == "tool_use"
    assert response.blocks == [
        blocks.text("Let me check."),
        blocks.tool_use("toolu_01", "get_weather", {"city": "Paris"}),
    ]
    assert response.items[1] == {
        "kind": "tool_call",
        "call_id": "toolu_01",
        "name": "get_weather",
        "arguments": {"city": "Paris"},
    }


@pytest.mark.parametrize(
    ("stop_reason", "status", "code"),
    [
        ("end_turn", "completed", None),
        ("stop_sequence", "completed", None),
        ("max_tokens", "incomplete", None),
        ("model_context_window_exceeded", "incomplete", None),
        ("tool_use", "paused", None),
        ("pause_turn", "paused", None),
        ("refusal", "failed", "refusal"),
    ],
)
def test_stop_reasons_map_to_outcomes(anthropic_env, sonnet, stop_reason, status, code):
    anthropic_env.enqueue(anthropic_stream([text_block("x")], stop_reason=stop_reason))
    outcome = finished(run(sonnet)).outcome
    assert (outcome["status"], outcome["reason"], outcome["code"]) == (status, stop_reason, code)


def test_thinking_redacted_thinking_and_unknown_blocks_are_kept(anthropic_env, sonnet):
    future = {"type": "hologram", "payload": {"x": 1}}
    anthropic_env.enqueue(
        anthropic_stream(
            [
                thinking_block("step one", signature="sig-1"),
                redacted_thinking_block("opaque"),
                future,
                text_block("answer"),
            ]
        )
    )
    response = finished(run(sonnet))
    thinking, redacted, unknown, text = response.blocks
    assert thinking == blocks.reasoning(
        None, "step one", {"type": "thinking", "thinking": "step one", "signature": "sig-1"}
    )
    assert redacted == blocks.reasoning("opaque", None, redacted_thinking_block("opaque"))
    assert unknown == blocks.unknown("anthropic", future)
    assert text == blocks.text("answer")
    assert blocks.rendered_text(response.blocks) == "answer"
    assert [i["kind"] for i in response.items] == ["assistant_message", "reasoning", "reasoning"]


def test_reasoning_and_unknown_anthropic_blocks_go_back_as_they_came(anthropic_env, sonnet):
    thinking = thinking_block("why", signature="sig-9")
    assistant = blocks.message(
        "assistant",
        [
            blocks.reasoning(None, "why", thinking),
            blocks.unknown("openai", {"type": "reasoning", "id": "rs_1"}),  # not ours: left out
            blocks.tool_use("toolu_9", "get_weather", {"city": "Oslo"}),
        ],
    )
    user = blocks.message("user", [blocks.tool_result("toolu_9", "sunny")])
    anthropic_env.enqueue(anthropic_text_stream("done"))
    spec = sonnet
    run(spec, make_request(spec, messages=[blocks.message("user", "go"), assistant, user]))
    sent = anthropic_env.requests[0].body["messages"]
    assert sent[1]["content"] == [
        thinking,
        {"type": "tool_use", "id": "toolu_9", "name": "get_weather", "input": {"city": "Oslo"}},
    ]
    assert sent[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_9", "content": "sunny"}
    ]


def test_an_unknown_event_type_is_logged_and_ignored(anthropic_env, sonnet, caplog):
    anthropic_env.enqueue(anthropic_text_stream("fine", unknown_event="message_hologram"))
    with caplog.at_level(logging.INFO, logger="providers"):
        events = run(sonnet)
    assert (
        RawEvent("message_hologram", {"type": "message_hologram", "detail": "a future event"})
        in events
    )
    assert finished(events).outcome["status"] == "completed"
    assert finished(events).blocks == [blocks.text("fine")]
    [record] = [r for r in caplog.records if r.getMessage() == "unknown stream event ignored"]
    assert record.event_type == "message_hologram"


def test_an_error_mid_stream_ends_failed_with_the_provider_code_and_keeps_the_text(
    anthropic_env, sonnet
):
    anthropic_env.enqueue(anthropic_error_stream("overloaded_error", "Overloaded", text="partial "))
    events = run(sonnet)
    response = finished(events)
    assert response.outcome == {
        "status": "failed",
        "reason": "error",
        "code": "overloaded_error",
        "message": "Overloaded",
    }
    assert response.blocks == [blocks.text("partial ")]
    assert events[-2] == RawEvent(
        "error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    )


def test_a_dropped_connection_ends_incomplete_and_keeps_the_partial_blocks(anthropic_env, sonnet):
    # message_start, ping, block start, 2 of 3 deltas: then the socket closes.
    anthropic_env.enqueue(anthropic_text_stream("abcdef", chunks=3, drop_after=5))
    events = run(sonnet)
    response = finished(events)
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["ab", "cd"]
    assert response.outcome["status"] == "incomplete"
    assert response.outcome["reason"] == "connection_lost"
    assert response.blocks == [blocks.text("abcd")]
    assert response.usage == {
        "input_tokens": 100,
        "output_tokens": 1,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
    }


def test_a_stream_cut_in_a_tool_call_keeps_what_came(anthropic_env, sonnet):
    anthropic_env.enqueue(
        anthropic_tool_use_stream("get_weather", {"city": "Rome"}, id="toolu_x", drop_after=5)
    )
    response = finished(run(sonnet, make_request(sonnet, tools=[TOOL])))
    assert response.outcome["status"] == "incomplete"
    [partial] = response.blocks
    assert partial["type"] == "tool_use" and partial["id"] == "toolu_x"
    assert partial["input"] == {"_unparsed_arguments": '{"city": "Ro'}  # 2 of 3 pieces


def test_a_rate_limit_is_retried_after_what_retry_after_says(anthropic_env, sonnet, sleeps):
    anthropic_env.enqueue(rate_limited(retry_after=2), overloaded(), anthropic_text_stream("ok"))
    response = finished(run(sonnet, sleep=sleeps.append, max_retries=3))
    assert response.blocks == [blocks.text("ok")]
    assert len(anthropic_env.requests) == 3
    assert sleeps[0] == 2.0
    assert 2.0 <= sleeps[1] <= 2.5  # second exponential step (no retry-after on the 529)


def test_retries_give_up_with_provider_unavailable_before_any_event(anthropic_env, sonnet, sleeps):
    anthropic_env.enqueue(overloaded(), overloaded(), overloaded())
    stream = provider_for(sonnet, sleep=sleeps.append, max_retries=2).stream(make_request(sonnet))
    with pytest.raises(ProviderUnavailable) as failed:
        next(stream)
    assert failed.value.code == "overloaded_error"
    assert failed.value.status == 529
    assert str(failed.value) == "HTTP 529 overloaded_error: Overloaded"
    assert len(anthropic_env.requests) == 3 and len(sleeps) == 2


def test_a_5xx_is_retried(anthropic_env, sonnet, sleeps):
    anthropic_env.enqueue(server_error(503), anthropic_text_stream("back"))
    assert finished(run(sonnet, sleep=sleeps.append)).blocks == [blocks.text("back")]
    assert len(sleeps) == 1


def test_an_auth_error_raises_at_once_and_is_never_retried(anthropic_env, sonnet, sleeps):
    anthropic_env.enqueue(authentication_error())
    with pytest.raises(ProviderAuthError) as refused:
        run(sonnet, sleep=sleeps.append)
    assert (refused.value.code, refused.value.status) == ("authentication_error", 401)
    assert sleeps == [] and len(anthropic_env.requests) == 1


def test_a_bad_request_raises_without_retry(anthropic_env, sonnet, sleeps):
    anthropic_env.enqueue(error(400, "invalid_request_error", "prompt is too long"))
    with pytest.raises(ProviderError) as refused:
        run(sonnet, sleep=sleeps.append)
    assert type(refused.value) is ProviderError
    assert str(refused.value) == "HTTP 400 invalid_request_error: prompt is too long"
    assert sleeps == []


def test_a_refused_connection_is_provider_unavailable(monkeypatch):
    with FakeMessagesAPI() as gone:
        base_url = gone.base_url  # nobody listens there once it stops
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", base_url)
    spec = model_get("sonnet")
    with pytest.raises(ProviderUnavailable) as failed:
        run(spec, max_retries=3)
    assert failed.value.code == "connection_error"


def test_a_missing_key_names_the_variable_and_sends_nothing(fake_messages_api, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_messages_api.base_url)
    spec = model_get("sonnet")
    with pytest.raises(MissingKey) as missing:
        run(spec)
    assert missing.value.variable == "ANTHROPIC_API_KEY"
    assert "ANTHROPIC_API_KEY" in str(missing.value)
    assert fake_messages_api.requests == []


def test_tool_results_are_moved_first_in_their_user_message(anthropic_env, sonnet):
    messages = [
        blocks.message("user", "weather?"),
        blocks.message("assistant", [blocks.tool_use("toolu_1", "get_weather", {"city": "A"})]),
        blocks.message("user", [blocks.text("also this"), blocks.tool_result("toolu_1", "rain")]),
    ]
    anthropic_env.enqueue(anthropic_text_stream("ok"))
    run(sonnet, make_request(sonnet, messages=messages, tools=[TOOL]))
    assert anthropic_env.requests[0].body["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "rain"},
        {"type": "text", "text": "also this"},
    ]


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        (  # a result with no tool_use right before it
            [
                blocks.message("user", "hi"),
                blocks.message("assistant", "hello"),
                blocks.message("user", [blocks.tool_result("toolu_1", "x")]),
            ],
            "message 2: tool_result toolu_1 does not answer a tool_use of the message right before it",
        ),
        (  # a tool_use whose result comes a message too late
            [
                blocks.message("user", "hi"),
                blocks.message("assistant", [blocks.tool_use("toolu_1", "get_weather", {})]),
                blocks.message("user", "wait"),
                blocks.message("assistant", "ok"),
                blocks.message("user", [blocks.tool_result("toolu_1", "x")]),
            ],
            "message 1: tool_use toolu_1 has no tool_result in the next message",
        ),
        (  # a tool_use never answered at the end of the transcript
            [
                blocks.message("user", "hi"),
                blocks.message("assistant", [blocks.tool_use("toolu_1", "get_weather", {})]),
            ],
            "message 1: tool_use toolu_1 has no tool_result in the next message",
        ),
        (  # a result in an assistant message
            [
                blocks.message("user", "hi"),
                blocks.message("assistant", [blocks.tool_result("toolu_1", "x")]),
            ],
            "message 1: tool_result toolu_1 must be in a user message",
        ),
    ],
)
def test_a_transcript_that_breaks_tool_ordering_is_refused_before_sending(
    anthropic_env, sonnet, messages, problem
):
    with pytest.raises(ToolOrderingError) as refused:
        run(sonnet, make_request(sonnet, messages=messages, tools=[TOOL]))
    assert str(refused.value) == problem
    assert isinstance(refused.value, ValueError)
    assert anthropic_env.requests == []


def test_images_are_sent_as_image_blocks(anthropic_env, sonnet):
    image = blocks.image("image/png", {"type": "base64", "data": "iVBORw0KGgo="})
    anthropic_env.enqueue(anthropic_text_stream("a cat"))
    run(
        sonnet,
        make_request(sonnet, messages=[blocks.message("user", [image, blocks.text("what?")])]),
    )
    assert anthropic_env.requests[0].body["messages"][0]["content"] == [
        {
            "type": "image",
            "source": {"type": "base64", "data": "iVBORw0KGgo=", "media_type": "image/png"},
        },
        {"type": "text", "text": "what?"},
    ]


def test_complete_makes_one_non_streaming_call_with_the_same_mapping(anthropic_env, sonnet):
    anthropic_env.enqueue(
        message(
            content=[text_block("Hi."), tool_use_block("get_weather", {"city": "B"}, id="toolu_b")]
        )
    )
    response = provider_for(sonnet).complete(make_request(sonnet, tools=[TOOL]))
    assert "stream" not in anthropic_env.requests[0].body
    assert response.outcome["status"] == "paused"
    assert response.blocks == [
        blocks.text("Hi."),
        blocks.tool_use("toolu_b", "get_weather", {"city": "B"}),
    ]
    assert response.usage == {
        "input_tokens": 100,
        "output_tokens": 20,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
    }
    assert response.raw_request == anthropic_env.requests[0].body


def test_a_slow_stream_delivers_each_chunk_as_it_comes(anthropic_env, sonnet):
    import time

    anthropic_env.enqueue(anthropic_text_stream("one two three", chunks=3, chunk_delay=0.15))
    started = time.monotonic()
    arrivals = []
    for event in provider_for(sonnet).stream(make_request(sonnet)):
        if isinstance(event, TextDelta):
            arrivals.append(time.monotonic() - started)
    assert len(arrivals) == 3
    assert arrivals[2] - arrivals[0] >= 0.25  # spread out: streamed, not buffered


def test_a_stream_that_stalls_past_the_timeout_ends_incomplete(anthropic_env, sonnet):
    anthropic_env.enqueue(anthropic_text_stream("slow", chunks=2).slowly(2.0))
    response = finished(run(sonnet, timeout=0.3))
    assert response.outcome["status"] == "incomplete"
    assert response.outcome["reason"] == "timeout"
    assert response.blocks == []


def test_a_consumer_that_stops_early_closes_the_stream_and_the_next_call_works(
    anthropic_env, sonnet
):
    anthropic_env.enqueue(
        anthropic_text_stream("a b c d e f", chunks=6, chunk_delay=0.05),
        anthropic_text_stream("next"),
    )
    stream = provider_for(sonnet).stream(make_request(sonnet))
    for event in stream:
        if isinstance(event, TextDelta):
            break
    stream.close()  # what a disconnected client does to the runner's loop
    assert finished(run(sonnet)).blocks == [blocks.text("next")]
