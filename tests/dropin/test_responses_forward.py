"""The Responses wire's same-wire case goes through the one pass-through (dropin/forward.py),
as the Anthropic wire's does: credentials (the client's own `Authorization` with
`X-LCM-Token`, else the server's key), past the budget the assembled `input` and nothing
else replaced, `context_length_exceeded` answered by compacting harder, receipts of the
exact bytes. The official `openai` SDK against the served endpoint; the upstream is the
fake Responses API (tests/support/fake_responses_api.py)."""

from __future__ import annotations

import json
import time

import openai
import pytest

from conversations.models import Message
from dropin.models import Thread
from dropin.wires import openai_responses
from tests.support.fake_prompt_cache import OpenAIPromptCache
from tests.support.fake_responses_api import (
    FakeResponsesAPI,
    function_call_item,
    message_item,
    reasoning_item,
    responses_error,
    responses_object,
    responses_stream,
)

SYSTEM = {
    "type": "message",
    "role": "developer",
    "content": [{"type": "input_text", "text": "You are a coding agent. Be terse."}],
}
TOOLS = [
    {
        "type": "function",
        "name": "exec_command",
        "description": "run a command",
        "strict": False,
        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
    },
    {"type": "web_search", "external_web_access": False},
]


def user(text: str) -> dict:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def client(live_server, *, key: str, token: str | None = None) -> openai.OpenAI:
    headers = {"X-LCM-Token": token} if token else None
    return openai.OpenAI(
        api_key=key,
        base_url=f"{live_server.url}/openai/v1",
        default_headers=headers,
        max_retries=0,
        timeout=30,
    )


# credentials --------------------------------------------------------------------------------


def test_the_clients_own_key_goes_upstream_unchanged_with_x_lcm_token(
    upstreams, live_server, caller
):
    upstreams.responses.enqueue(responses_object("hi"))
    own = client(live_server, key="sk-the-clients-own", token=caller[1])
    own.responses.create(model="gpt", input="hello", store=False)
    sent = upstreams.responses.requests[-1].headers
    assert sent["authorization"] == "Bearer sk-the-clients-own"
    assert "x-lcm-token" not in sent
    assert caller[1] not in json.dumps(sent)
    # Never stored: not in a message, not in the stored thread.
    assert not Message.objects.filter(content__contains="sk-the-clients-own").exists()


def test_the_server_key_replaces_the_lcm_token_and_nothing_else(upstreams, oai, caller):
    upstreams.responses.enqueue(responses_object("hi"))
    oai.responses.create(
        model="gpt",
        input="hello",
        store=False,
        extra_headers={"session-id": "s-1", "x-codex-turn-metadata": '{"request_kind":"turn"}'},
    )
    sent = upstreams.responses.requests[-1].headers
    assert sent["authorization"] == "Bearer sk-openai-upstream"
    assert caller[1] not in json.dumps(sent)
    assert sent["session-id"] == "s-1"  # the client's other headers go on as they came
    assert sent["x-codex-turn-metadata"] == '{"request_kind":"turn"}'


def test_x_lcm_token_without_a_key_of_the_clients_own_uses_the_server_key(
    upstreams, live_server, caller
):
    """Codex's provider entry without `env_key` sends no Authorization at all."""
    import httpx

    upstreams.responses.enqueue(responses_object("hi"))
    response = httpx.post(
        f"{live_server.url}/openai/v1/responses",
        json={"model": "gpt", "input": "hello", "store": False},
        headers={"X-LCM-Token": caller[1]},
        timeout=30,
    )
    assert response.status_code == 200
    assert upstreams.responses.requests[-1].headers["authorization"] == "Bearer sk-openai-upstream"


# past the budget ----------------------------------------------------------------------------


@pytest.fixture
def cached_upstream(upstreams, monkeypatch):
    """A Responses upstream that reports usage from what it was sent (per prompt_cache_key)."""
    with FakeResponsesAPI(prompt_cache=True) as api:
        monkeypatch.setenv("OPENAI_BASE_URL", api.base_url)
        yield api


def _ordered(raw: bytes) -> list[tuple[str, object]]:
    return json.loads(raw, object_pairs_hook=list)


def test_past_the_budget_the_upstream_gets_the_assembled_input_and_nothing_else_changes(
    cached_upstream, oai, settings
):
    settings.LCM_DROPIN_UNLISTED_CONTEXT_LIMIT = 6000
    history: list[dict] = [SYSTEM]
    options = {
        "tools": TOOLS,
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "reasoning": {"effort": "medium", "summary": "auto"},
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "sess-budget",
        "max_output_tokens": 1000,
        "text": {"verbosity": "low"},
    }
    extra = {"client_metadata": {"turn_id": "t-1"}, "a_future_field": [1, {"x": "é"}]}
    answers = []
    for n in range(10):
        history.append(user(f"note {n}: " + "detail " * 250))
        asked = list(history)
        call = function_call_item("exec_command", {"cmd": f"echo {n}"}, call_id=f"call_{n}")
        thought = reasoning_item(f"step {n}", encrypted_content=f"enc-{n}+/==")
        cached_upstream.enqueue(responses_stream([thought, call]))
        with oai.responses.stream(
            model="gpt-unlisted", input=history, extra_body=extra, **options
        ) as stream:
            answer = stream.get_final_response()
        history += [item.model_dump(exclude_none=True) for item in answer.output]
        history.append({"type": "function_call_output", "call_id": f"call_{n}", "output": f"{n}"})
        answers.append(answer)

    received = cached_upstream.requests
    assert len(received) == 10
    last = received[-1]
    sent = last.body
    assert len(sent["input"]) < len(asked)  # the assembled context, not the history
    # Byte for byte outside `input`: the client's fields in its order, each value as sent,
    # the compact serialization the drop-in writes when it replaces a part.
    # The first request fit: its bytes are the SDK's own, passed through untouched.
    assert [k for k, _ in _ordered(last.raw)] == [k for k, _ in _ordered(received[0].raw)]
    assert {k: v for k, v in sent.items() if k != "input"} == {
        **options,
        **extra,
        "model": "gpt-unlisted",
        "stream": True,
    }
    assert last.raw == json.dumps(sent, ensure_ascii=False, separators=(",", ":")).encode()
    # `input`: the agent's prompt first, then (summaries, when there are any) the client's
    # own items from a cut on, byte-exact (reasoning with its encrypted content).
    assert sent["input"][0] == SYSTEM
    tail = [item for item in sent["input"][1:] if not _is_summary(item)]
    assert tail == asked[len(asked) - len(tail) :]
    assert tail[0]["type"] == "message" and tail[0]["role"] == "user"
    # The usage the client reads back is the upstream's for what it was sent.
    full = OpenAIPromptCache().usage({**sent, "input": asked})["input_tokens"]
    assert answers[-1].usage.input_tokens == cached_upstream.cache_reports[-1]["input_tokens"]
    assert answers[-1].usage.input_tokens < full
    # Stored once, whole: every item of the history, then the answers.
    thread = Thread.objects.get()
    assert (
        thread.message_count
        == Message.objects.filter(conversation_id=thread.conversation_id).count()
    )


def _is_summary(item: dict) -> bool:
    text = json.dumps(item)
    return openai_responses.SUMMARIES_HEADING in text


def test_context_length_exceeded_is_answered_by_compacting_harder(upstreams, oai):
    upstreams.responses.enqueue(
        responses_error(
            400,
            "invalid_request_error",
            "context_length_exceeded",
            "Your input exceeds the context window of this model. Please adjust your input "
            "and try again.",
        ),
        responses_object("short enough now"),
    )
    history = [SYSTEM]
    for n in range(6):
        history += [
            user(f"question {n} " + "word " * 50),
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": f"answer {n}"}],
            },
        ]
    history.append(user("last question"))
    raw = oai.responses.with_raw_response.create(model="gpt", input=history, store=False)
    assert raw.parse().output_text == "short enough now"
    assert raw.headers["x-lcm-compacted"] == "true"
    retried = upstreams.responses.requests[-1].body["input"]
    assert len(retried) < len(history)
    assert retried[0] == SYSTEM and retried[-1] == history[-1]


def test_an_upstream_error_is_relayed_as_it_came(upstreams, oai):
    upstreams.responses.enqueue(
        responses_error(401, "invalid_request_error", "invalid_api_key", "Incorrect API key.")
    )
    with pytest.raises(openai.AuthenticationError) as refused:
        oai.responses.create(model="gpt", input="hello", store=False)
    assert refused.value.body["code"] == "invalid_api_key"


# receipts and the store ---------------------------------------------------------------------


def test_a_passed_through_call_leaves_a_receipt_of_the_exact_bytes(upstreams, oai):
    from receipts.models import Receipt
    from receipts.selectors import replay

    upstreams.responses.enqueue(responses_stream([message_item("Hello!")]))
    with oai.responses.stream(model="gpt", input=[SYSTEM, user("hi")], store=False) as stream:
        stream.get_final_response()
    thread = Thread.objects.get()
    receipts = Receipt.objects.filter(conversation_id=thread.conversation_id)
    for _ in range(50):  # a stream's receipt is written as its relay ends, just after the bytes
        if receipts.exists():
            break
        time.sleep(0.1)
    (receipt,) = receipts
    rebuilt = replay(receipt)
    assert rebuilt.body == upstreams.responses.requests[-1].raw
    assert rebuilt.exact


def test_a_stored_answer_keeps_the_upstreams_id_and_is_found_by_it(upstreams, oai):
    upstreams.responses.enqueue(responses_object("kept"), responses_object("continued"))
    first = oai.responses.create(model="gpt", input="remember this")
    assert oai.responses.retrieve(first.id).output_text == "kept"
    second = oai.responses.create(model="gpt", input="and?", previous_response_id=first.id)
    assert second.output_text == "continued"
    sent = upstreams.responses.requests[-1].body
    assert "previous_response_id" not in sent and len(sent["input"]) == 3


# after the agent's compaction ---------------------------------------------------------------

CODEX_COMPACTION_PROMPT = (
    "You are performing a CONTEXT CHECKPOINT COMPACTION. Create a handoff summary for "
    "another LLM that will resume the task."
)
# Codex 0.171 (core/templates/compact/summary_prefix.md) puts this before the summary it keeps.
SUMMARY_PREFIX = (
    "Another language model started to solve this problem and produced a summary of its "
    "thinking process. You also have access to the state of the tools that were used by that "
    "language model. Use this to build on the work that has already been done and avoid "
    "duplicating work. Here is the summary produced by the other language model, use the "
    "information in this summary to assist with your own analysis:"
)
ENVIRONMENT = user("<environment_context>\n  <cwd>/work</cwd>\n</environment_context>")


def _turn(oai, history: list[dict], answer) -> tuple[object, list[dict]]:
    raw = oai.responses.with_raw_response.create(
        model="gpt", input=history, store=False, prompt_cache_key="sess-after"
    )
    return raw, [*history, *[item.model_dump(exclude_none=True) for item in raw.parse().output]]


def test_the_request_after_codexs_checkpoint_continues_the_conversation_storing_nothing_twice(
    upstreams, oai
):
    from conversations.models import Summary, SummaryMessage

    upstreams.responses.enqueue(
        responses_object(output=[function_call_item("exec_command", {"cmd": "ls"}, "call_a")]),
        responses_object("the file list is a.txt"),
        responses_object("continuing after the checkpoint"),
        responses_object("and on"),
    )
    prompt = user("list the files, remember the word teapot")
    raw, history = _turn(oai, [SYSTEM, ENVIRONMENT, prompt], None)
    history.append({"type": "function_call_output", "call_id": "call_a", "output": "a.txt\n"})
    raw, history = _turn(oai, history, None)
    conversation_id = int(raw.headers["x-lcm-conversation-id"])
    before = list(
        Message.objects.filter(conversation_id=conversation_id).values_list("pk", flat=True)
    )
    with oai.responses.stream(
        model="gpt",
        input=[*history, user(CODEX_COMPACTION_PROMPT)],
        store=False,
        prompt_cache_key="sess-after",
    ) as stream:
        checkpoint = stream.get_final_response().output_text

    # Codex's history from now on: its prompt, its user messages, the checkpoint.
    kept = [SYSTEM, ENVIRONMENT, prompt, user(f"{SUMMARY_PREFIX}\n{checkpoint}")]
    after, history = _turn(oai, [*kept, user("go on")], None)
    assert after.headers["x-lcm-conversation-id"] == str(conversation_id)
    assert after.headers["x-lcm-forked"] == "false"
    assert upstreams.responses.requests[-1].body["input"] == [*kept, user("go on")]
    again, _ = _turn(oai, [*history, user("and again")], None)
    assert again.headers["x-lcm-conversation-id"] == str(conversation_id)
    assert again.headers["x-lcm-forked"] == "false"

    assert Thread.objects.count() == 1
    messages = Message.objects.filter(conversation_id=conversation_id).order_by("seq")
    texts = [m.content for m in messages]
    assert sum("remember the word teapot" in text for text in texts) == 1  # never twice
    new = [m for m in messages if m.pk not in before]
    assert new[0].content.startswith(SUMMARY_PREFIX) and "go on" in new[0].content
    assert [m.content for m in new[1:]] == [
        "continuing after the checkpoint",
        "and again",
        "and on",
    ]
    # The checkpoint, stored as Codex's compaction over the messages it replaced.
    (compaction,) = Summary.objects.filter(
        conversation_id=conversation_id, model="codex (agent compaction)"
    )
    assert checkpoint in compaction.content
    covered = set(
        SummaryMessage.objects.filter(summary=compaction).values_list("message_id", flat=True)
    )
    assert covered == set(before)
