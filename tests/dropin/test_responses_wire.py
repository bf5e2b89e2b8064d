"""`POST /openai/v1/responses` with the official `openai` SDK, against the real server and
a Responses upstream (fake_responses_api) or a model on another wire: the body passed
through unchanged, the stream relayed byte for byte, translated answers in the same event
sequence, and the wire's own errors."""

from __future__ import annotations

import httpx
import pytest

from conversations.models import Message
from dropin.models import Thread
from tests.support import fake_messages_api as fm
from tests.support.fake_responses_api import (
    custom_tool_call_item,
    function_call_item,
    message_item,
    reasoning_item,
    responses_object,
    responses_stream,
)

SYSTEM = {
    "type": "message",
    "role": "developer",
    "content": [{"type": "input_text", "text": "be terse"}],
}
TOOLS = [
    {
        "type": "function",
        "name": "exec_command",
        "description": "run",
        "strict": False,
        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
    },
    {
        "type": "custom",
        "name": "apply_patch",
        "description": "patch files",
        "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"},
    },
    {
        "type": "namespace",
        "name": "multi_agent_v1",
        "description": "agents",
        "tools": [
            {
                "type": "function",
                "name": "spawn_agent",
                "parameters": {"type": "object", "properties": {}},
            }
        ],
    },
    {"type": "web_search", "external_web_access": False},
]


def user(text: str) -> dict:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def stored(conversation_id: int) -> list[tuple[str, str]]:
    return list(
        Message.objects.filter(conversation_id=conversation_id)
        .order_by("seq")
        .values_list("role", "content")
    )


def test_create_passes_the_body_through_and_answers_the_upstream_object(upstreams, oai):
    thought = reasoning_item("weighing it", encrypted_content="gAAAA-opaque==")
    upstreams.responses.enqueue(responses_object(output=[thought, message_item("hello there")]))
    body = {
        "input": [SYSTEM, user("hi")],
        "tools": TOOLS,
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "reasoning": {"summary": "auto"},
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "session-1",
    }
    extra = {"client_metadata": {"session_id": "session-1"}, "a_future_field": {"x": [1, 2]}}
    raw = oai.responses.with_raw_response.create(model="gpt", **body, extra_body=extra)
    answer = raw.parse()

    sent = upstreams.responses.requests[0].body
    assert sent == {**body, **extra, "model": "gpt-5.5"}
    assert answer.output_text == "hello there"
    assert answer.id.startswith("resp_") and answer.id != upstreams.responses.requests and True
    assert answer.output[0].type == "reasoning"
    assert answer.output[0].encrypted_content == "gAAAA-opaque=="
    conversation_id = int(raw.headers["x-lcm-conversation-id"])
    assert stored(conversation_id) == [("user", "hi"), ("assistant", "hello there")]
    assert Thread.objects.get(conversation_id=conversation_id).system == "be terse"


def _sse_bytes(events) -> bytes:
    return b"".join(event.encode() for event in events)


def test_the_stream_is_relayed_byte_for_byte(upstreams, live_server, caller):
    patch = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n"
    scripted = responses_stream(
        [
            reasoning_item("plan", encrypted_content="enc==/+"),
            message_item("patching"),
            custom_tool_call_item("apply_patch", patch, call_id="call_p"),
            function_call_item("exec_command", {"cmd": "ls"}, call_id="call_l"),
        ],
        unknown_event="response.some_future_event",
    )
    upstreams.responses.enqueue(scripted)
    body = {
        "model": "gpt",
        "input": [SYSTEM, user("go")],
        "tools": TOOLS,
        "stream": True,
        "store": False,
    }
    with httpx.stream(
        "POST",
        f"{live_server.url}/openai/v1/responses",
        json=body,
        headers={"Authorization": f"Bearer {caller[1]}"},
        timeout=30,
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        received = b"".join(response.iter_bytes())
    assert received == _sse_bytes(scripted.events)  # the upstream's own response id too
    conversation_id = int(response.headers["x-lcm-conversation-id"])
    assistant = Message.objects.get(conversation_id=conversation_id, role="assistant")
    tools = [(p.tool_name, p.tool_input) for p in assistant.parts.filter(part_type="tool")]
    assert tools == [("apply_patch", {"input": patch}), ("exec_command", {"cmd": "ls"})]


def test_the_sdk_stream_helper_reads_the_relayed_stream(upstreams, oai):
    upstreams.responses.enqueue(
        responses_stream([reasoning_item("hmm"), message_item("streamed answer")], chunks=4)
    )
    with oai.responses.stream(model="gpt", input="say it", store=False) as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == "streamed answer"
    assert final.output_text == "streamed answer"
    assert final.usage.input_tokens > 0


def test_a_codex_tool_round_sends_back_reasoning_byte_exact_and_is_stored_once(upstreams, oai):
    call = function_call_item("exec_command", {"cmd": "echo hi"}, call_id="call_1")
    thought = reasoning_item("run it", encrypted_content="gAAA+/opaque==")
    upstreams.responses.enqueue(responses_stream([thought, call]), responses_object("it said hi"))
    first = [SYSTEM, user("say hi with a command")]
    with oai.responses.stream(model="gpt", input=first, tools=TOOLS, store=False) as stream:
        answer = stream.get_final_response()
    items = [item.model_dump(exclude_none=True) for item in answer.output]
    second = [
        *first,
        *items,
        {"type": "function_call_output", "call_id": "call_1", "output": "hi\n"},
    ]
    raw = oai.responses.with_raw_response.create(
        model="gpt", input=second, tools=TOOLS, store=False
    )
    assert raw.parse().output_text == "it said hi"

    resent = upstreams.responses.requests[1].body["input"]
    assert resent[2]["encrypted_content"] == "gAAA+/opaque=="
    conversation_id = int(raw.headers["x-lcm-conversation-id"])
    roles = [role for role, _ in stored(conversation_id)]
    assert roles == ["user", "assistant", "tool", "assistant"]
    assert Thread.objects.count() == 1


def test_a_model_on_another_wire_answers_in_the_responses_event_sequence(upstreams, oai):
    upstreams.messages.enqueue(
        fm.anthropic_stream(
            [
                fm.text_block("let me patch"),
                fm.tool_use_block("apply_patch", {"input": "*** Begin Patch"}, id="toolu_1"),
            ],
            stop_reason="tool_use",
        )
    )
    kinds = []
    with oai.responses.stream(model="claude", input="patch it", tools=TOOLS, store=False) as stream:
        for event in stream:
            kinds.append(event.type)
        final = stream.get_final_response()
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert "response.output_text.delta" in kinds
    assert "response.custom_tool_call_input.delta" in kinds
    assert [item.type for item in final.output] == ["message", "custom_tool_call"]
    assert final.output[1].input == "*** Begin Patch"
    sent_tools = {tool["name"] for tool in upstreams.messages.requests[0].body["tools"]}
    assert {"exec_command", "apply_patch", "spawn_agent"} <= sent_tools


@pytest.mark.parametrize(
    ("item", "param"),
    [
        ({"type": "telepathy", "thought": "x"}, "input[1].type"),
        ({"type": "function_call", "name": "x", "arguments": "{}"}, "input[1].call_id"),
        (
            {"type": "message", "role": "user", "content": [{"type": "hologram"}]},
            "input[1].content[0].type",
        ),
        ({"type": "message", "role": "narrator", "content": "hi"}, "input[1].role"),
        ({"type": "function_call_output", "call_id": "c", "output": 5}, "input[1].output"),
        ("just a string", "input[1]"),
    ],
)
def test_a_malformed_item_is_refused_naming_its_field_and_nothing_is_stored(
    upstreams, oai, item, param
):
    import openai

    with pytest.raises(openai.BadRequestError) as refused:
        oai.responses.create(model="gpt", input=[user("hi"), item])
    assert refused.value.status_code == 400
    assert refused.value.body["param"] == param
    assert refused.value.body["type"] == "invalid_request_error"
    assert Thread.objects.count() == 0 and Message.objects.count() == 0
    assert upstreams.responses.requests == []


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("POST", "/openai/v1/nothing/here", 404),
        ("GET", "/openai/v1/responses", 405),
        ("POST", "/anthropic/v1/nowhere", 404),
        ("PUT", "/openai/v1/chat/completions", 405),
    ],
)
def test_every_path_under_the_drop_in_answers_in_its_wire_json_shape(
    live_server, caller, method, path, status
):
    response = httpx.request(
        method, live_server.url + path, headers={"Authorization": f"Bearer {caller[1]}"}
    )
    assert response.status_code == status
    body = response.json()
    if path.startswith("/anthropic/"):
        assert body["type"] == "error" and body["error"]["type"]
    else:
        assert body["error"]["type"] == "invalid_request_error" and body["error"]["message"]


CODEX_COMPACTION_PROMPT = (
    "You are performing a CONTEXT CHECKPOINT COMPACTION. Create a handoff summary for "
    "another LLM that will resume the task."
)


def _codex_turn(oai, upstreams, history: list[dict], answer: str, key: str = "sess-1"):
    upstreams.responses.enqueue(responses_object(answer))
    raw = oai.responses.with_raw_response.create(
        model="gpt", input=history, store=False, prompt_cache_key=key
    )
    return raw, [*history, *[item.model_dump(exclude_none=True) for item in raw.parse().output]]


def test_a_codex_compaction_request_is_answered_from_the_products_compaction(upstreams, oai):
    raw, history = _codex_turn(oai, upstreams, [SYSTEM, user("remember the word teapot")], "ok")
    conversation_id = int(raw.headers["x-lcm-conversation-id"])
    before = stored(conversation_id)
    compaction = [*history, user(CODEX_COMPACTION_PROMPT)]
    with oai.responses.stream(
        model="gpt", input=compaction, store=False, prompt_cache_key="sess-1"
    ) as stream:
        final = stream.get_final_response()

    assert len(upstreams.responses.requests) == 1  # no model call for the checkpoint
    assert f"conversation {conversation_id}" in final.output_text
    assert "ok" in final.output_text  # the work since the user spoke
    assert final.usage.input_tokens < 2000
    assert stored(conversation_id) == before  # the prompt is answered, not stored


def test_a_compaction_trigger_gets_exactly_one_compaction_item_which_comes_back_as_text(
    upstreams, oai
):
    _, history = _codex_turn(oai, upstreams, [SYSTEM, user("the code word is kettle")], "noted")
    answer = oai.responses.create(
        model="gpt", input=[*history, {"type": "compaction_trigger"}], store=False
    )
    assert [item.type for item in answer.output] == ["compaction"]
    item = answer.output[0].model_dump(exclude_none=True)

    upstreams.responses.enqueue(responses_object("still here"))
    oai.responses.create(model="gpt", input=[SYSTEM, item, user("go on")], store=False)
    sent = upstreams.responses.requests[-1].body["input"]
    assert sent[1]["type"] == "message" and "kettle" in sent[1]["content"][0]["text"]


def test_a_resumed_codex_session_stores_nothing_twice(upstreams, oai):
    raw, history = _codex_turn(oai, upstreams, [SYSTEM, user("first")], "one")
    raw2, history = _codex_turn(oai, upstreams, [*history, user("second")], "two")
    # `codex exec resume`: the whole history again, plus the new prompt.
    raw3, _ = _codex_turn(oai, upstreams, [*history, user("third")], "three")
    ids = {r.headers["x-lcm-conversation-id"] for r in (raw, raw2, raw3)}
    assert len(ids) == 1
    contents = [content for _, content in stored(int(ids.pop()))]
    assert contents == ["first", "one", "second", "two", "third", "three"]
    assert raw3.headers["x-lcm-conversation"] == raw.headers["x-lcm-conversation"]


def test_stored_answers_are_retrieved_continued_and_deleted_through_the_sdk(upstreams, oai):
    import openai

    upstreams.responses.enqueue(
        responses_stream([message_item("the capital is Paris")]),
        responses_object("about 2.1 million"),
    )
    with oai.responses.stream(model="gpt", input="capital of France?") as stream:
        first = stream.get_final_response()
    again = oai.responses.retrieve(first.id)
    assert again.id == first.id and again.output_text == "the capital is Paris"

    second = oai.responses.create(
        model="gpt", input="its population?", previous_response_id=first.id
    )
    sent = upstreams.responses.requests[1].body
    assert "previous_response_id" not in sent
    texts = [
        item["content"] if isinstance(item["content"], str) else item["content"][0]["text"]
        for item in sent["input"]
    ]
    assert texts == ["capital of France?", "the capital is Paris", "its population?"]
    assert oai.responses.retrieve(second.id).output_text == "about 2.1 million"
    assert Thread.objects.count() == 1

    oai.responses.delete(first.id)
    with pytest.raises(openai.NotFoundError):
        oai.responses.retrieve(first.id)
    with pytest.raises(openai.NotFoundError):
        oai.responses.create(model="gpt", input="x", previous_response_id="resp_nope")


def test_an_answer_with_store_false_is_not_kept(upstreams, oai):
    import openai

    upstreams.responses.enqueue(responses_object("ephemeral"))
    answer = oai.responses.create(model="gpt", input="hi", store=False)
    with pytest.raises(openai.NotFoundError):
        oai.responses.retrieve(answer.id)
