"""The official `openai` and `anthropic` SDKs, unchanged but for their base URL and key,
against the real server, with each upstream wire behind it (cross-wire included)."""

from __future__ import annotations

import asyncio
import json

import pytest

from conversations.models import Message
from dropin.models import Thread
from tests.support import fake_messages_api as fm
from tests.support.fake_chat_completions_api import (
    chat_completion,
    chat_text_stream,
    chat_tool_call_stream,
)
from tests.support.fake_responses_api import responses_object

WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}
OAI_WEATHER = {
    "type": "function",
    "function": {
        "name": WEATHER["name"],
        "description": WEATHER["description"],
        "parameters": WEATHER["input_schema"],
    },
}


def stored(conversation_id: int) -> list[tuple[int, str, str]]:
    return list(
        Message.objects.filter(conversation_id=conversation_id)
        .order_by("seq")
        .values_list("seq", "role", "content")
    )


def test_openai_sdk_to_a_chat_completions_upstream(upstreams, oai):
    upstreams.chat.enqueue(chat_completion("Bonjour!", prompt_tokens=30, cached_tokens=16))
    raw = oai.chat.completions.with_raw_response.create(
        model="local",
        messages=[{"role": "system", "content": "be kind"}, {"role": "user", "content": "hi"}],
    )
    completion = raw.parse()

    assert completion.choices[0].message.content == "Bonjour!"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.model == "local"
    assert completion.usage.prompt_tokens == 30
    assert completion.usage.prompt_tokens_details.cached_tokens == 16
    sent = upstreams.chat.requests[0].body
    assert sent["messages"] == [
        {"role": "system", "content": "be kind"},
        {"role": "user", "content": "hi"},
    ]
    assert upstreams.chat.requests[0].headers["authorization"] == "Bearer sk-chat-upstream"
    conversation_id = int(raw.headers["x-lcm-conversation-id"])
    assert raw.headers["x-lcm-compacted"] == "false"
    assert int(raw.headers["x-lcm-tokens-sent"]) > 0
    assert raw.headers["x-lcm-conversation"].startswith("lcm-")
    assert stored(conversation_id) == [(1, "user", "hi"), (2, "assistant", "Bonjour!")]
    assert Thread.objects.get(conversation_id=conversation_id).system == "be kind"


def test_openai_sdk_streams_text_and_the_usage_chunk(upstreams, oai):
    upstreams.chat.enqueue(chat_text_stream("one two three", chunks=3, prompt_tokens=21))
    stream = oai.chat.completions.create(
        model="local",
        messages=[{"role": "user", "content": "count"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "one two three"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == []
    assert chunks[-1].usage.prompt_tokens == 21
    thread = Thread.objects.get()
    assert stored(thread.conversation_id) == [
        (1, "user", "count"),
        (2, "assistant", "one two three"),
    ]


def test_openai_sdk_tool_calls_round_trip_through_a_streaming_upstream(upstreams, oai):
    upstreams.chat.enqueue(
        chat_tool_call_stream("get_weather", {"city": "Paris"}, call_id="call_7"),
        chat_completion("It rains in Paris."),
    )
    stream = oai.chat.completions.create(
        model="local",
        messages=[{"role": "user", "content": "weather in Paris?"}],
        tools=[OAI_WEATHER],
        stream=True,
    )
    calls: dict[int, dict] = {}
    finish = None
    for chunk in stream:
        for delta in chunk.choices[0].delta.tool_calls or [] if chunk.choices else []:
            call = calls.setdefault(delta.index, {"id": None, "name": None, "arguments": ""})
            call["id"] = delta.id or call["id"]
            call["name"] = (delta.function.name if delta.function else None) or call["name"]
            call["arguments"] += (delta.function.arguments or "") if delta.function else ""
        if chunk.choices and chunk.choices[0].finish_reason:
            finish = chunk.choices[0].finish_reason
    assert finish == "tool_calls"
    assert calls == {0: {"id": "call_7", "name": "get_weather", "arguments": '{"city": "Paris"}'}}

    answer = oai.chat.completions.create(
        model="local",
        messages=[
            {"role": "user", "content": "weather in Paris?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_7",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_7", "content": "rain"},
        ],
        tools=[OAI_WEATHER],
    )
    assert answer.choices[0].message.content == "It rains in Paris."
    assert upstreams.chat.requests[1].body["messages"][-2:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_7",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_7", "content": "rain"},
    ]
    thread = Thread.objects.get()  # the second request continued the first conversation
    assert [role for _, role, _ in stored(thread.conversation_id)] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]


def test_anthropic_sdk_to_an_anthropic_upstream_with_tools(upstreams, claude):
    upstreams.messages.enqueue(
        fm.message(content=[fm.tool_use_block("get_weather", {"city": "Oslo"}, id="toolu_1")])
    )
    raw = claude.messages.with_raw_response.create(
        model="claude",
        max_tokens=300,
        system="be brief",
        messages=[{"role": "user", "content": "weather in Oslo?"}],
        tools=[WEATHER],
    )
    message = raw.parse()
    assert message.stop_reason == "tool_use"
    assert [(b.type, b.id, b.name, b.input) for b in message.content] == [
        ("tool_use", "toolu_1", "get_weather", {"city": "Oslo"})
    ]
    sent = upstreams.messages.requests[0].body
    assert sent["system"] == "be brief"
    assert sent["messages"] == [{"role": "user", "content": "weather in Oslo?"}]
    assert sent["tools"] == [WEATHER]
    assert raw.headers["x-lcm-conversation"]


def test_anthropic_sdk_streams_from_a_chat_completions_upstream(upstreams, claude):
    upstreams.chat.enqueue(chat_text_stream("hello there", chunks=2))
    with claude.messages.stream(
        model="local", max_tokens=200, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        texts = list(stream.text_stream)
        final = stream.get_final_message()
    assert "".join(texts) == "hello there"
    assert final.stop_reason == "end_turn"
    assert [b.text for b in final.content] == ["hello there"]
    assert upstreams.chat.requests[0].body["messages"] == [{"role": "user", "content": "hi"}]


def test_anthropic_sdk_tool_use_stream_from_a_chat_upstream(upstreams, claude):
    upstreams.chat.enqueue(
        chat_tool_call_stream("get_weather", {"city": "Rome"}, call_id="call_r", text="Checking")
    )
    with claude.messages.stream(
        model="local",
        max_tokens=200,
        messages=[{"role": "user", "content": "Rome?"}],
        tools=[WEATHER],
    ) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "tool_use"
    assert final.content[0].type == "text" and final.content[0].text == "Checking"
    assert (final.content[1].type, final.content[1].id, final.content[1].input) == (
        "tool_use",
        "call_r",
        {"city": "Rome"},
    )


def test_openai_sdk_to_an_anthropic_upstream(upstreams, oai):
    upstreams.messages.enqueue(fm.anthropic_text_stream("from claude", chunks=2))
    stream = oai.chat.completions.create(
        model="claude", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "from claude"
    assert upstreams.messages.requests[0].body["messages"] == [{"role": "user", "content": "hi"}]


def test_anthropic_sdk_to_a_responses_upstream(upstreams, claude):
    upstreams.responses.enqueue(responses_object("via responses"))
    message = claude.messages.create(
        model="gpt", max_tokens=100, messages=[{"role": "user", "content": "hi"}]
    )
    assert [b.text for b in message.content] == ["via responses"]


def test_async_clients_stream_and_complete(upstreams, oai_async, claude_async):
    upstreams.chat.enqueue(chat_text_stream("async one"), chat_completion("async two"))

    async def both():
        stream = await oai_async.chat.completions.create(
            model="local", messages=[{"role": "user", "content": "a"}], stream=True
        )
        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
        message = await claude_async.messages.create(
            model="local", max_tokens=50, messages=[{"role": "user", "content": "b"}]
        )
        return text, message.content[0].text

    assert asyncio.run(both()) == ("async one", "async two")


def test_models_and_count_tokens(upstreams, oai, claude):
    names = [model.id for model in oai.models.list()]
    assert names[0] == "offline"
    assert {"local", "claude", "gpt"} <= set(names)
    counted = claude.messages.count_tokens(
        model="claude", messages=[{"role": "user", "content": "x" * 400}]
    )
    assert counted.input_tokens == 104  # 100 for the text, 4 for the message


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_an_upstream_stream_error_before_the_first_byte_keeps_its_status(
    upstreams, oai, claude, wire
):
    upstreams.chat.enqueue(
        *[
            __import__("tests.support.fake_chat_completions_api", fromlist=["x"]).chat_error(
                400, "invalid_request_error", "context_length_exceeded", "too long"
            )
        ]
    )
    import anthropic
    import openai

    if wire == "openai":
        with pytest.raises(openai.BadRequestError) as caught:
            oai.chat.completions.create(model="local", messages=[{"role": "user", "content": "x"}])
        assert "too long" in json.dumps(caught.value.body)
    else:
        with pytest.raises(anthropic.BadRequestError) as caught:
            claude.messages.create(
                model="local", max_tokens=10, messages=[{"role": "user", "content": "x"}]
            )
        assert caught.value.body["error"]["type"] == "api_error"
        assert "too long" in caught.value.body["error"]["message"]


def test_the_offline_model_answers_without_any_upstream(upstreams, oai, claude):
    completion = oai.chat.completions.create(
        model="offline", messages=[{"role": "user", "content": "Hello"}]
    )
    assert completion.choices[0].message.content
    assert completion.choices[0].finish_reason == "stop"
    with claude.messages.stream(
        model="offline", max_tokens=50, messages=[{"role": "user", "content": "Hello"}]
    ) as stream:
        text = "".join(stream.text_stream)
    assert text
    assert upstreams.chat.requests == [] and upstreams.messages.requests == []
