"""The OpenAI Responses adapter through the real `openai` SDK against the fake Responses
API speaking the streaming protocol over local HTTP."""

from __future__ import annotations

import json
import logging

import pytest

from providers import blocks
from providers.base import RawEvent, TextDelta, ToolCallDelta, ToolCallStart
from providers.config import model_get
from providers.errors import ProviderAuthError, ProviderUnavailable, ToolOrderingError
from providers.registry import provider_for
from tests.providers.helpers import TOOL, finished, make_request
from tests.support.fake_responses_api import (
    function_call_item,
    message_item,
    reasoning_item,
    responses_auth_error,
    responses_error_event_stream,
    responses_function_call_stream,
    responses_object,
    responses_overloaded,
    responses_rate_limited,
    responses_server_error,
    responses_stream,
    responses_text_stream,
)


@pytest.fixture
def gpt(openai_env):
    return model_get("gpt")


def run(spec, request=None, **kwargs) -> list:
    return list(provider_for(spec, **kwargs).stream(request or make_request(spec)))


def test_a_text_stream_accumulates_deltas_by_index(openai_env, gpt):
    openai_env.enqueue(responses_text_stream("hello world", chunks=3))
    events = run(gpt)

    raw = [e.event_type for e in events if isinstance(e, RawEvent)]
    assert raw == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["hell", "o wo", "rld"]
    response = finished(events)
    assert response.blocks == [blocks.text("hello world")]
    assert response.items == [{"kind": "assistant_message", "blocks": [blocks.text("hello world")]}]
    assert response.outcome == {
        "status": "completed",
        "reason": "completed",
        "code": None,
        "message": None,
    }
    assert response.usage == {
        "input_tokens": 100,
        "output_tokens": 20,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": None,
    }
    assert response.model == "gpt-fake-1"
    assert response.raw_response["status"] == "completed"


def test_the_request_sets_every_policy_parameter_explicitly(openai_env, gpt):
    openai_env.enqueue(responses_text_stream("ok"))
    response = finished(run(gpt, make_request(gpt, "hi", system="You are terse.")))

    [sent] = openai_env.requests
    assert sent.path == "/v1/responses"
    assert sent.headers["authorization"] == "Bearer sk-test-openai-key"
    assert sent.body == {
        "model": "gpt-5.5",
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
        ],
        "instructions": "You are terse.",
        "max_output_tokens": 256,
        "truncation": "disabled",
        "store": False,
        "parallel_tool_calls": False,
        "include": ["reasoning.encrypted_content"],
        "stream": True,
    }
    assert response.raw_request == sent.body


def test_the_openai_table_of_the_config_file_sets_store_truncation_and_parallel_calls(
    openai_env, tmp_path, monkeypatch
):
    config = tmp_path / "config.toml"
    config.write_text('[openai]\ntruncation = "auto"\nstore = true\nparallel_tool_calls = true\n')
    monkeypatch.setenv("LCM_CONFIG_FILE", str(config))
    openai_env.enqueue(responses_text_stream("a"))
    spec = model_get("gpt")
    run(spec, make_request(spec, tools=[TOOL]))
    body = openai_env.requests[0].body
    assert (body["truncation"], body["store"], body["parallel_tool_calls"]) == ("auto", True, True)
    assert "include" not in body  # stored responses need no encrypted reasoning
    assert body["tools"] == [
        {
            "type": "function",
            "name": "get_weather",
            "description": "The weather in a city.",
            "parameters": TOOL["input_schema"],
            "strict": False,
        }
    ]
    assert body["tool_choice"] == "auto"


def test_a_function_call_becomes_a_tool_call_item_and_a_tool_use_block(openai_env, gpt):
    openai_env.enqueue(
        responses_function_call_stream(
            "get_weather", {"city": "Paris"}, call_id="call_1", text="Checking.", chunks=3
        )
    )
    events = run(gpt, make_request(gpt, tools=[TOOL]))
    assert [e for e in events if isinstance(e, ToolCallStart)] == [
        ToolCallStart(1, "call_1", "get_weather")
    ]
    pieces = [e.partial_json for e in events if isinstance(e, ToolCallDelta)]
    assert "".join(pieces) == '{"city": "Paris"}' and len(pieces) == 3
    response = finished(events)
    assert response.outcome["status"] == "paused" and response.outcome["reason"] == "tool_use"
    assert response.blocks == [
        blocks.text("Checking."),
        blocks.tool_use("call_1", "get_weather", {"city": "Paris"}),
    ]
    assert response.items == [
        {"kind": "assistant_message", "blocks": [blocks.text("Checking.")]},
        {
            "kind": "tool_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": {"city": "Paris"},
        },
    ]


def test_tool_results_go_back_as_function_call_output_with_the_call_id(openai_env, gpt):
    rs = reasoning_item("thinking", "enc-123")
    messages = [
        blocks.message("user", "weather?"),
        blocks.message(
            "assistant",
            [
                blocks.reasoning("enc-123", "thinking", rs),
                blocks.text("Checking."),
                blocks.tool_use("call_1", "get_weather", {"city": "Paris"}),
            ],
        ),
        blocks.message("user", [blocks.text("thanks"), blocks.tool_result("call_1", "sunny")]),
    ]
    openai_env.enqueue(responses_text_stream("It is sunny."))
    run(gpt, make_request(gpt, messages=messages, tools=[TOOL]))
    assert openai_env.requests[0].body["input"] == [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "weather?"}],
        },
        rs,
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Checking.", "annotations": []}],
        },
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": json.dumps({"city": "Paris"}),
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "thanks"}]},
    ]


def test_an_orphan_tool_result_is_refused_before_sending(openai_env, gpt):
    messages = [blocks.message("user", [blocks.tool_result("call_x", "?")])]
    with pytest.raises(ToolOrderingError):
        run(gpt, make_request(gpt, messages=messages))
    assert openai_env.requests == []


def test_reasoning_and_unknown_items_are_kept(openai_env, gpt):
    rs = reasoning_item("planned it", "enc-xyz")
    future = {"type": "web_hologram", "id": "wh_1", "status": "completed"}
    openai_env.enqueue(responses_stream([rs, future, message_item("done")]))
    response = finished(run(gpt))
    assert response.blocks == [
        blocks.reasoning("enc-xyz", "planned it", rs),
        blocks.unknown("openai", future),
        blocks.text("done"),
    ]
    assert response.items == [
        {"kind": "reasoning", "encrypted_content": "enc-xyz", "raw": rs},
        {"kind": "unknown", "provider": "openai", "raw": future},
        {"kind": "assistant_message", "blocks": [blocks.text("done")]},
    ]


def test_an_incomplete_response_carries_the_reason(openai_env, gpt):
    openai_env.enqueue(
        responses_stream(
            [message_item("cut sh")], status="incomplete", incomplete_reason="max_output_tokens"
        )
    )
    events = run(gpt)
    response = finished(events)
    assert events[-2].event_type == "response.incomplete"
    assert response.outcome == {
        "status": "incomplete",
        "reason": "max_output_tokens",
        "code": None,
        "message": None,
    }
    assert response.blocks == [blocks.text("cut sh")]


def test_a_failed_response_carries_the_error_code(openai_env, gpt):
    openai_env.enqueue(
        responses_stream(
            [], status="failed", error={"code": "server_error", "message": "Something broke"}
        )
    )
    response = finished(run(gpt))
    assert response.outcome == {
        "status": "failed",
        "reason": "failed",
        "code": "server_error",
        "message": "Something broke",
    }


def test_an_error_event_mid_stream_ends_failed_and_keeps_the_text(openai_env, gpt):
    openai_env.enqueue(
        responses_error_event_stream("rate_limit_exceeded", "slow down", text="half ")
    )
    response = finished(run(gpt))
    assert response.outcome["status"] == "failed"
    assert response.outcome["code"] == "rate_limit_exceeded"
    assert response.outcome["message"] == "slow down"
    assert response.blocks == [blocks.text("half ")]


def test_a_dropped_connection_ends_incomplete_with_the_partial_items(openai_env, gpt):
    # created, in_progress, item added, part added, 2 of 4 deltas: then the socket closes.
    openai_env.enqueue(responses_text_stream("abcdefgh", chunks=4, drop_after=6))
    events = run(gpt)
    response = finished(events)
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["ab", "cd"]
    assert response.outcome["status"] == "incomplete"
    assert response.outcome["reason"] == "connection_lost"
    assert response.blocks == [blocks.text("abcd")]


def test_an_unknown_event_type_is_logged_and_ignored(openai_env, gpt, caplog):
    openai_env.enqueue(responses_text_stream("fine", unknown_event="response.hologram.delta"))
    with caplog.at_level(logging.INFO, logger="providers"):
        events = run(gpt)
    assert "response.hologram.delta" in [e.event_type for e in events if isinstance(e, RawEvent)]
    assert finished(events).blocks == [blocks.text("fine")]
    [record] = [r for r in caplog.records if r.getMessage() == "unknown stream event ignored"]
    assert record.event_type == "response.hologram.delta"


def test_429_and_529_are_retried_honouring_retry_after(openai_env, gpt, sleeps):
    openai_env.enqueue(
        responses_rate_limited(retry_after=3), responses_overloaded(), responses_text_stream("ok")
    )
    response = finished(run(gpt, sleep=sleeps.append, max_retries=2))
    assert response.blocks == [blocks.text("ok")]
    assert sleeps[0] == 3.0 and 2.0 <= sleeps[1] <= 2.5
    assert len(openai_env.requests) == 3


def test_retries_exhausted_raise_provider_unavailable_with_the_code(openai_env, gpt, sleeps):
    openai_env.enqueue(responses_server_error(502), responses_server_error(502))
    with pytest.raises(ProviderUnavailable) as failed:
        run(gpt, sleep=sleeps.append, max_retries=1)
    assert (failed.value.status, failed.value.code) == (502, "server_error")
    assert len(sleeps) == 1


def test_an_auth_error_is_never_retried(openai_env, gpt, sleeps):
    openai_env.enqueue(responses_auth_error())
    with pytest.raises(ProviderAuthError) as refused:
        run(gpt, sleep=sleeps.append)
    assert (refused.value.status, refused.value.code) == (401, "invalid_api_key")
    assert sleeps == [] and len(openai_env.requests) == 1


def test_complete_reads_typed_output_items(openai_env, gpt):
    openai_env.enqueue(
        responses_object(
            output=[
                message_item("Sure."),
                function_call_item("get_weather", {"city": "B"}, "call_b"),
            ]
        )
    )
    response = provider_for(gpt).complete(make_request(gpt, tools=[TOOL]))
    assert "stream" not in openai_env.requests[0].body
    assert response.outcome["status"] == "paused"
    assert response.blocks == [
        blocks.text("Sure."),
        blocks.tool_use("call_b", "get_weather", {"city": "B"}),
    ]
    assert response.usage == {
        "input_tokens": 100,
        "output_tokens": 20,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": None,
    }


def test_a_stream_that_stalls_past_the_timeout_ends_incomplete(openai_env, gpt):
    openai_env.enqueue(responses_text_stream("slow", chunks=2).slowly(2.0))
    response = finished(run(gpt, timeout=0.3))
    assert response.outcome["status"] == "incomplete"
    assert response.outcome["reason"] == "timeout"


def test_encrypted_reasoning_can_be_turned_off_for_models_that_refuse_it(
    openai_env, tmp_path, monkeypatch
):
    config = tmp_path / "config.toml"
    config.write_text("[openai]\ninclude_encrypted_reasoning = false\n")
    monkeypatch.setenv("LCM_CONFIG_FILE", str(config))
    openai_env.enqueue(responses_text_stream("a"))
    spec = model_get("gpt")
    run(spec)
    assert "include" not in openai_env.requests[0].body
    assert openai_env.requests[0].body["store"] is False


def test_annotations_of_earlier_answers_are_not_sent_back(openai_env, gpt):
    cited = blocks.text("See [1].", [{"type": "char_location", "cited_text": "x"}])
    messages = [
        blocks.message("user", "q"),
        blocks.message("assistant", [cited]),
        blocks.message("user", "more"),
    ]
    openai_env.enqueue(responses_text_stream("a"))
    run(gpt, make_request(gpt, messages=messages))
    assert openai_env.requests[0].body["input"][1]["content"] == [
        {"type": "output_text", "text": "See [1].", "annotations": []}
    ]
