"""Same-wire pass-through (issue 41): a request on the Anthropic wire whose upstream speaks
Anthropic Messages reaches it as the client sent it, bytes and headers, and the answer
comes back as the upstream sent it, while both are stored as what they are.

The Claude Code request is a real one, recorded from the CLI (tests/dropin/data/, see
scripts/claude_code_e2e.py), sent as its bytes; the other requests go through the official
`anthropic` SDK."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest

from conversations.models import Message
from conversations.models import MessagePart as Part
from dropin.models import Thread
from retrieval.grep import GrepRequest, grep_for_user
from tests.support.fake_messages_api import (
    anthropic_stream,
    message,
    text_block,
    thinking_block,
    tool_use_block,
)

DATA = Path(__file__).parent / "data"


def recorded(name: str) -> tuple[dict, bytes, dict]:
    data = json.loads((DATA / name).read_text())
    raw = json.dumps(data["body"], ensure_ascii=False, separators=(",", ":")).encode()
    data["path"] = data["path"].removeprefix("/anthropic")
    return data, raw, dict(data["headers"])


def post(live_server, path: str, raw: bytes, headers: dict) -> httpx.Response:
    with httpx.Client(timeout=30) as client:
        return client.post(f"{live_server.url}/anthropic{path}", content=raw, headers=headers)


def test_claude_codes_request_reaches_the_upstream_byte_for_byte(upstreams, live_server, caller):
    scripted = anthropic_stream([thinking_block("They greet me."), text_block("Hello!")])
    upstreams.messages.enqueue(scripted)
    data, raw, headers = recorded("claude_code_oneshot.json")
    headers["x-api-key"] = "sk-ant-the-clients-own"
    headers["X-LCM-Token"] = caller[1]

    answer = post(live_server, data["path"], raw, headers)

    assert answer.status_code == 200
    assert answer.content == b"".join(event.encode() for event in scripted.events)
    sent = upstreams.messages.requests[-1]
    assert sent.raw == raw
    assert sent.path == data["path"]  # /v1/messages?beta=true
    for name, value in data["headers"]:
        assert sent.headers[name.lower()] == value, name
    assert sent.headers["x-api-key"] == "sk-ant-the-clients-own"
    assert not [name for name in sent.headers if name.startswith("x-lcm")]
    assert answer.headers["X-LCM-Compacted"] == "false"


def test_claude_codes_shapes_are_stored_as_what_they_are(upstreams, live_server, caller):
    upstreams.messages.enqueue(
        anthropic_stream([thinking_block("They greet me.", "sig-real"), text_block("Hello!")])
    )
    data, raw, headers = recorded("claude_code_oneshot.json")
    headers["X-LCM-Token"] = caller[1]
    post(live_server, data["path"], raw, headers)

    thread = Thread.objects.get()
    stored = list(Message.objects.filter(conversation_id=thread.conversation_id).order_by("seq"))
    assert [m.role for m in stored] == ["user", "system", "assistant"]
    assert stored[1].content.startswith("Available agent types")
    reasoning = Part.objects.get(message=stored[2], part_type="reasoning")
    assert reasoning.text_content == "They greet me."
    assert reasoning.metadata["signature"] == "sig-real"


def test_server_keys_replace_the_lcm_token_and_nothing_else(upstreams, claude):
    upstreams.messages.enqueue(message("fine"))
    claude.messages.create(
        model="claude",
        max_tokens=64000,
        messages=[{"role": "user", "content": "hi"}],
        metadata={"user_id": "someone"},
        extra_headers={"anthropic-beta": "context-1m-2025-08-07"},
        extra_body={"output_config": {"effort": "high"}, "thinking": {"type": "adaptive"}},
    )
    sent = upstreams.messages.requests[-1]
    assert sent.headers["x-api-key"] == "sk-ant-upstream"
    assert sent.headers["anthropic-beta"] == "context-1m-2025-08-07"
    body = sent.body
    assert body["model"] == "claude-fake"  # the configured id of "claude"
    assert body["max_tokens"] == 64000
    assert body["output_config"] == {"effort": "high"}
    assert body["thinking"] == {"type": "adaptive"}
    assert body["metadata"] == {"user_id": "someone"}
    assert "tool_choice" not in body


def test_tool_calls_are_stored_as_parts_grep_finds(upstreams, claude, caller):
    call = tool_use_block("Bash", {"command": "grep -rn quux_handler src/quux/router.py"})
    upstreams.messages.enqueue(anthropic_stream([text_block("Looking."), call]))
    history = [{"role": "user", "content": "where is quux_handler?"}]
    with claude.messages.stream(model="claude", max_tokens=500, messages=history) as stream:
        first = stream.get_final_message()
    assert first.content[1].input == call["input"]

    upstreams.messages.enqueue(message("It is in router.py, line 12."))
    history += [
        {"role": "assistant", "content": [b.model_dump() for b in first.content]},
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": call["id"],
                    "content": "src/quux/router.py:12: def quux_handler(request):",
                }
            ],
        },
    ]
    claude.messages.create(model="claude", max_tokens=500, messages=history)

    result = Part.objects.get(part_type="tool", tool_output__isnull=False, tool_output__gt="")
    assert result.tool_name == "Bash"
    assert Message.objects.filter(role="tool").count() == 1
    user = caller[0]
    for query in ("grep -rn quux_handler", "src/quux/router.py:12"):
        hits = grep_for_user(user=user, request=GrepRequest(query=f'"{query}"'))
        assert hits, query


def test_an_upstream_prompt_too_long_is_never_passed_on(upstreams, claude, monkeypatch):
    from tests.support.fake_messages_api import error

    upstreams.messages.enqueue(
        error(400, "invalid_request_error", "prompt is too long: 250000 tokens > 200000 maximum"),
        message("short enough now"),
    )
    history = []
    for n in range(6):
        history += [
            {"role": "user", "content": f"question {n} " + "word " * 50},
            {"role": "assistant", "content": f"answer {n}"},
        ]
    history.append({"role": "user", "content": "last question"})
    reply = claude.messages.create(model="claude", max_tokens=500, messages=history)
    assert reply.content[0].text == "short enough now"
    retried = upstreams.messages.requests[-1].body["messages"]
    assert len(retried) < len(history)
    assert retried[-1] == history[-1]


def test_head_on_the_base_answers(live_server):
    assert httpx.head(f"{live_server.url}/anthropic").status_code == 200


@pytest.mark.parametrize("header", ["X-LCM-Token"])
def test_a_bad_lcm_token_is_refused_and_nothing_reaches_the_upstream(
    upstreams, live_server, header
):
    data, raw, headers = recorded("claude_code_oneshot.json")
    headers[header] = "not-a-token"
    answer = post(live_server, data["path"], raw, headers)
    assert answer.status_code == 401
    assert answer.json()["error"]["type"] == "authentication_error"
    assert upstreams.messages.requests == []
    assert not Message.objects.exists()


BASH = {"name": "Bash", "description": "Run a command.", "input_schema": {"type": "object"}}


def session_metadata(session: str) -> dict:
    return {"user_id": json.dumps({"device_id": "0", "session_id": session})}


def test_a_continued_session_stores_nothing_twice_when_its_system_prompt_changes(upstreams, claude):
    upstreams.messages.enqueue(message("first answer"), message("second answer"))
    history = [{"role": "user", "content": "remember quux"}]
    claude.messages.create(
        model="claude-opus-4-8", max_tokens=64000, system="Opus 4.8 (1M context)",
        messages=history, tools=[BASH], metadata=session_metadata("s-1"),
    )  # fmt: skip
    history += [
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": "and now?"},
    ]
    claude.messages.create(
        model="claude-opus-4-8", max_tokens=64000, system="Opus 4.8",
        messages=history, tools=[BASH], metadata=session_metadata("s-1"),
    )  # fmt: skip
    thread = Thread.objects.get()
    assert thread.key == "session:s-1"
    stored = Message.objects.filter(conversation_id=thread.conversation_id)
    assert [m.role for m in stored.order_by("seq")] == ["user", "assistant", "user", "assistant"]
    assert upstreams.messages.requests[0].body["model"] == "claude-opus-4-8"  # unlisted: as sent


def test_a_side_request_is_recorded_beside_the_session_and_is_no_fork(upstreams, claude):
    upstreams.messages.enqueue(message("Quux refactor"), message("main answer"))
    claude.messages.create(
        model="claude-opus-4-8", max_tokens=64000, messages=[
            {"role": "user", "content": "<session>remember quux</session> Write the title."}
        ], tools=[], metadata=session_metadata("s-2"),
    )  # fmt: skip
    claude.messages.create(
        model="claude-opus-4-8", max_tokens=64000,
        messages=[{"role": "user", "content": "remember quux"}],
        tools=[BASH], metadata=session_metadata("s-2"),
    )  # fmt: skip
    main = Thread.objects.get(key="session:s-2")
    side = Thread.objects.get(key__startswith="session:s-2:side:")
    assert main.parent_id is None and side.parent_id is None
    assert main.message_count == 2 and side.message_count == 2


def test_a_recorded_claude_code_session_passes_through_and_is_stored_once(
    upstreams, live_server, caller
):
    """The CLI's real requests of one session (a title request, a Bash/Read/Edit tool loop,
    then `--continue`), replayed as their bytes: each reaches the upstream unchanged, and
    the session is stored once (the answers the upstream gives are the ones the CLI sent
    back in its next request)."""
    files = sorted((DATA / "claude_code_session").glob("*.json"))
    requests = [recorded(f"claude_code_session/{f.name}") for f in files]
    mains = [body for body, _, _ in requests if body["body"]["tools"]]
    for index, main in enumerate(mains):
        at = len(main["body"]["messages"])
        following = mains[index + 1]["body"]["messages"] if index + 1 < len(mains) else []
        answer = following[at]["content"] if len(following) > at else [text_block("ok")]
        upstreams.messages.enqueue(message(content=answer))
    upstreams.messages.enqueue(message("Marker file round trip"))  # the title
    for data, raw, headers in requests:
        headers["X-LCM-Token"] = caller[1]
        headers["x-api-key"] = "sk-ant-own"
        if not data["body"]["tools"]:  # the side request is answered last in the queue
            side = (data, raw, headers)
            continue
        answer = post(live_server, data["path"], raw, headers)
        assert answer.status_code == 200, answer.content
        assert upstreams.messages.requests[-1].raw == raw
        assert answer.headers["X-LCM-Forked"] == "false"
    assert post(live_server, side[0]["path"], side[1], side[2]).status_code == 200

    main = Thread.objects.exclude(key__contains=":side:").get()
    last = mains[-1]["body"]["messages"]
    stored = Message.objects.filter(conversation_id=main.conversation_id)
    assert stored.count() == len(last) + 1  # every message once, and the last answer
    assert stored.filter(role="system").count() == 1
    assert Thread.objects.filter(key__contains=":side:").count() == 1


def test_past_the_budget_the_prefix_grows_by_appending_between_cuts(upstreams, claude, settings):
    """Past the budget the upstream gets summaries and the client's own recent messages
    from a cut that is kept while the requests fit: one request's messages are the next
    one's prefix, except at a new cut."""
    settings.LCM_DROPIN_UNLISTED_CONTEXT_LIMIT = 5000
    history: list[dict] = []
    sent: list[list] = []
    for n in range(14):
        history.append({"role": "user", "content": f"note {n}: " + "detail " * 250})
        upstreams.messages.enqueue(message(f"noted {n}"))
        claude.messages.create(
            model="claude-unlisted", max_tokens=1000, messages=history,
            metadata=session_metadata("s-cut"), tools=[BASH],
        )  # fmt: skip
        history.append({"role": "assistant", "content": f"noted {n}"})
        sent.append(upstreams.messages.requests[-1].body["messages"])
    compacted = [i for i, messages in enumerate(sent) if len(messages) < 2 * i + 1]
    assert len(compacted) >= 5
    pairs = [(sent[i], sent[i + 1]) for i in compacted if i + 1 in compacted]
    appended = sum(1 for before, after in pairs if after[: len(before)] == before)
    # A head that moves on every request (the old behaviour) appends on none of them.
    assert appended >= len(pairs) / 2
    assert all(messages[-1]["content"].startswith("note ") for messages in sent)


def test_a_passed_through_call_leaves_a_receipt_that_replays_its_bytes(
    upstreams, live_server, caller
):
    from receipts.models import Receipt
    from receipts.selectors import replay

    upstreams.messages.enqueue(anthropic_stream([text_block("Hello!")]))
    data, raw, headers = recorded("claude_code_oneshot.json")
    headers["X-LCM-Token"] = caller[1]
    post(live_server, data["path"], raw, headers)

    thread = Thread.objects.get()
    receipts = Receipt.objects.filter(conversation_id=thread.conversation_id)
    for _ in range(50):  # a stream's receipt is written as its relay ends, just after the bytes
        if receipts.exists():
            break
        time.sleep(0.1)
    (receipt,) = receipts
    rebuilt = replay(receipt)
    assert rebuilt.body == upstreams.messages.requests[-1].raw == raw
    assert rebuilt.exact
    assert receipt.site == "dropin"
