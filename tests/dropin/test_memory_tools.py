"""`X-LCM-Tools: memory`: the server offers its memory tools to the upstream model, runs
them in a bounded loop, and the client sees only its own tool calls and the answer."""

from __future__ import annotations

import json

import pytest

from conversations.models import Message
from tests.factories import ConversationFactory
from tests.support.fake_chat_completions_api import chat_completion, tool_call

MEMORY = {"X-LCM-Tools": "memory"}
CLIENT_TOOL = {
    "name": "open_door",
    "description": "Open a door.",
    "input_schema": {"type": "object", "properties": {"door": {"type": "string"}}},
}


def remember(upstreams, claude):
    upstreams.chat.enqueue(chat_completion("Noted."))
    claude.messages.create(
        model="local",
        max_tokens=100,
        messages=[{"role": "user", "content": "The vault code is PELICAN-4471."}],
        extra_headers={"X-LCM-Conversation": "vault"},
    )


def test_the_model_reaches_an_old_fact_through_lcm_grep(upstreams, claude):
    remember(upstreams, claude)
    seen: list[dict] = []

    def answer(request):
        seen.append(request.body)
        tool_message = request.body["messages"][-1]
        assert tool_message["role"] == "tool"
        found = json.loads(tool_message["content"])["results"]
        # The hit names the message; its snippet marks the match (markers differ by database).
        hits = [hit for hit in found if hit["type"] == "message" and hit["seq"] == 1]
        code = "PELICAN-4471" if hits and "PELICAN" in hits[0]["snippet"] else repr(found)
        return chat_completion(f"The code is {code}.")

    upstreams.chat.enqueue(
        chat_completion(None, tool_calls=[tool_call("lcm_grep", {"query": "PELICAN"}, "call_g")]),
        answer,
    )
    with claude.messages.with_streaming_response.create(
        model="local",
        max_tokens=100,
        stream=False,
        messages=[
            {"role": "user", "content": "The vault code is PELICAN-4471."},
            {"role": "assistant", "content": "Noted."},
            {"role": "user", "content": "What was the vault code?"},
        ],
        extra_headers={**MEMORY, "X-LCM-Conversation": "vault"},
    ) as raw:
        message = json.loads(raw.read())
        steps = raw.headers["x-lcm-tool-steps"]
    assert [block["text"] for block in message["content"]] == ["The code is PELICAN-4471."]
    assert message["stop_reason"] == "end_turn"
    assert steps == "2"
    first = upstreams.chat.requests[1].body
    assert [tool["function"]["name"] for tool in first["tools"]] == [
        "lcm_grep",
        "lcm_describe",
        "lcm_expand",
        "memory_search",
    ]
    assert seen[0]["messages"][-2]["tool_calls"][0]["function"]["name"] == "lcm_grep"
    # Stored: the client's messages and the final answer, not the internal tool loop.
    assert list(
        Message.objects.filter(role="assistant").order_by("seq").values_list("content", flat=True)
    ) == ["Noted.", "The code is PELICAN-4471."]


def test_client_tools_pass_through_beside_the_memory_tools(upstreams, oai):
    upstreams.chat.enqueue(
        chat_completion(None, tool_calls=[tool_call("open_door", {"door": "front"}, "call_d")])
    )
    stream = oai.chat.completions.create(
        model="local",
        messages=[{"role": "user", "content": "open the front door"}],
        tools=[
            {
                "type": "function",
                "function": {
                    "name": CLIENT_TOOL["name"],
                    "description": CLIENT_TOOL["description"],
                    "parameters": CLIENT_TOOL["input_schema"],
                },
            }
        ],
        stream=True,
        extra_headers=MEMORY,
    )
    chunks = list(stream)
    calls = [d for c in chunks if c.choices for d in c.choices[0].delta.tool_calls or []]
    assert [(c.id, c.function.name) for c in calls if c.id] == [("call_d", "open_door")]
    assert "".join(c.function.arguments or "" for c in calls) == '{"door": "front"}'
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
    names = [tool["function"]["name"] for tool in upstreams.chat.requests[0].body["tools"]]
    assert names == ["open_door", "lcm_grep", "lcm_describe", "lcm_expand", "memory_search"]


def test_a_client_tool_named_like_a_memory_tool_is_refused(upstreams, claude):
    import anthropic
    import pytest

    with pytest.raises(anthropic.BadRequestError) as caught:
        claude.messages.create(
            model="local",
            max_tokens=10,
            messages=[{"role": "user", "content": "x"}],
            tools=[{**CLIENT_TOOL, "name": "lcm_grep"}],
            extra_headers=MEMORY,
        )
    assert "lcm_grep" in caught.value.body["error"]["message"]
    assert Message.objects.count() == 0


@pytest.mark.django_db
def test_memory_search_without_a_query_is_an_error_the_model_reads(user):
    from dropin import tools

    conversation = ConversationFactory(owner=user)
    for empty in ({}, {"query": "  "}):
        result = tools.execute(
            user=user, conversation_id=conversation.pk, name="memory_search", input=empty
        )
        assert result.is_error and result.text == "memory_search: query must not be empty"
