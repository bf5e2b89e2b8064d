"""What the real Codex 0.171 and OpenCode 1.18.33 sent (recorded by scripts/responses_clis.py,
long texts trimmed, keys redacted), replayed against `POST /openai/v1/responses` with the
scripted agent upstream behind it: every one answered, never a 500, its history stored
once, the upstream sent the client's body unchanged but for the model, and Codex's
compaction request answered from the product's compaction without a model call."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from conversations.models import Message
from dropin.models import Thread
from dropin.wires import openai_responses
from tests.support import agent_upstream

DATA = Path(__file__).parent / "data" / "responses_clis"
RECORDED = sorted(path.stem for path in DATA.glob("*.json"))
# The headers a client chose (its key is replaced by the caller's LCM token).
_DROPPED = {"authorization", "accept-encoding", "content-type", "content-length", "host"}


def _replay(live_server, token: str, name: str) -> tuple[dict, httpx.Response, bytes]:
    record = json.loads((DATA / f"{name}.json").read_text())
    response, received = _send(live_server, token, record)
    return record, response, received


def _send(live_server, token: str, record: dict) -> tuple[httpx.Response, bytes]:
    headers = {k: v for k, v in record["headers"].items() if k not in _DROPPED}
    headers["authorization"] = f"Bearer {token}"
    body = {**record["body"], "model": "gpt"}
    with httpx.stream(
        "POST",
        f"{live_server.url}/openai/v1/responses",
        json=body,
        headers=headers,
        timeout=30,
    ) as response:
        received = b"".join(response.iter_bytes())
    return response, received


def _completed(received: bytes) -> dict:
    """The response object of a stream's response.completed event."""
    frame = received.split(b"event: response.completed\n", 1)[1]
    return json.loads(frame.split(b"data: ", 1)[1].split(b"\n", 1)[0])["response"]


def test_the_recordings_cover_each_kind_of_request():
    assert set(RECORDED) >= {
        "codex-first",
        "codex-tool-round",
        "codex-apply-patch-round",
        "codex-resume",
        "codex-compaction",
        "codex-before-compaction",
        "codex-after-compaction",
        "codex-first-lcm-tools",
        "opencode-title",
        "opencode-first",
        "opencode-tool-round",
    }


@pytest.mark.parametrize("name", RECORDED)
def test_a_recorded_request_is_answered_and_its_history_stored_once(
    upstreams, live_server, caller, name
):
    upstreams.responses.respond = agent_upstream.answer
    record, response, received = _replay(live_server, caller[1], name)

    assert response.status_code == 200, received[:500]
    events = [line for line in received.split(b"\n") if line.startswith(b"event: ")]
    assert events[0] == b"event: response.created"
    assert events[-1] == b"event: response.completed"
    conversation_id = int(response.headers["x-lcm-conversation-id"])
    messages = Message.objects.filter(conversation_id=conversation_id)
    assert Thread.objects.count() == 1
    if name == "codex-compaction":
        assert response.headers["x-lcm-checkpoint"] == "true"
        assert upstreams.responses.requests == []
        return
    sent = upstreams.responses.requests[0].body
    assert sent == {**record["body"], "model": "gpt-5.5"}
    # Each item of the request stored once, then the answer.
    expected = len(openai_responses.parse(record["body"]).messages) + 1
    assert messages.count() == expected


def test_a_codex_session_replayed_in_order_is_one_conversation_stored_once(
    upstreams, live_server, caller
):
    """The tool rounds and the `codex exec resume` of one recorded session: each request
    resends the history, which the product finds (by the session's prompt_cache_key)."""
    upstreams.responses.respond = agent_upstream.answer
    answers = [
        _replay(live_server, caller[1], name)[1]
        for name in ("codex-tool-round", "codex-apply-patch-round", "codex-resume")
    ]
    assert all(response.status_code == 200 for response in answers)
    assert len({response.headers["x-lcm-conversation-id"] for response in answers}) == 1
    assert {response.headers["x-lcm-forked"] for response in answers} == {"false"}
    last = json.loads((DATA / "codex-resume.json").read_text())["body"]
    conversation_id = int(answers[-1].headers["x-lcm-conversation-id"])
    stored = Message.objects.filter(conversation_id=conversation_id).count()
    assert stored == len(openai_responses.parse(last).messages) + 1
    assert Thread.objects.count() == 1


def test_codexs_request_after_the_products_checkpoint_continues_the_conversation(
    upstreams, live_server, caller
):
    """The real Codex's requests around an auto-compaction (scripts/responses_clis.py
    through): the last turn before it, its compaction request (answered by the product),
    then its next request, which holds its prompt, its user message and, after its summary
    prefix, the checkpoint (the recorded one's text, from another run, replaced by this
    run's). That request continues the conversation: no branch, the user's messages not
    stored again, the checkpoint stored as Codex's compaction over what it replaced."""
    from conversations.models import Summary, SummaryMessage

    upstreams.responses.respond = agent_upstream.answer
    before, response, received = _replay(live_server, caller[1], "codex-before-compaction")
    conversation_id = int(response.headers["x-lcm-conversation-id"])
    replaced = set(
        Message.objects.filter(conversation_id=conversation_id).values_list("pk", flat=True)
    )
    prompt = json.loads((DATA / "codex-compaction.json").read_text())["body"]["input"][-1]
    history = [*before["body"]["input"], *_completed(received)["output"]]
    asked = {**before, "body": {**before["body"], "input": [*history, prompt]}}
    response, received = _send(live_server, caller[1], asked)
    assert response.headers["x-lcm-checkpoint"] == "true"
    checkpoint = _completed(received)["output"][0]["content"][0]["text"]

    after = json.loads((DATA / "codex-after-compaction.json").read_text())
    items = after["body"]["input"]
    summary_prefix = items[-1]["content"][0]["text"].split("\n", 1)[0]
    assert summary_prefix.startswith("Another language model started to solve this problem")
    items[-1]["content"][0]["text"] = f"{summary_prefix}\n{checkpoint}"
    response, received = _send(live_server, caller[1], after)

    assert response.status_code == 200, received[:500]
    assert response.headers["x-lcm-conversation-id"] == str(conversation_id)
    assert response.headers["x-lcm-forked"] == "false"
    assert Thread.objects.count() == 1
    assert upstreams.responses.requests[-1].body == {**after["body"], "model": "gpt-5.5"}
    messages = Message.objects.filter(conversation_id=conversation_id).order_by("seq")
    new = [m for m in messages if m.pk not in replaced]
    assert len(new) == 2  # the checkpoint, then the answer: nothing of before again
    assert new[0].content.startswith(summary_prefix)
    for kept in ("<environment_context>", "RUN: echo compaction-marker-0"):  # Codex kept them
        assert sum(kept in m.content for m in messages) == 1
    (compaction,) = Summary.objects.filter(
        conversation_id=conversation_id, model="codex (agent compaction)"
    )
    covered = SummaryMessage.objects.filter(summary=compaction).values_list("message_id", flat=True)
    assert set(covered) == replaced

    # The request after that continues it again (its history now begins with the checkpoint).
    answer = _completed(received)["output"]
    follow = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}
    nxt = {**after, "body": {**after["body"], "input": [*items, *answer, follow]}}
    response, _ = _send(live_server, caller[1], nxt)
    assert response.headers["x-lcm-conversation-id"] == str(conversation_id)
    assert response.headers["x-lcm-forked"] == "false"
    assert Message.objects.filter(conversation_id=conversation_id).count() == len(messages) + 2


def test_codexs_first_turn_offers_the_lcm_tools_with_lcm_connects_catalog():
    """Codex set up by `lcm_connect codex --write` (its catalog without tool search): the
    first request of a new `codex exec` lists the lcm tools, not `tool_search`."""
    body = json.loads((DATA / "codex-first-lcm-tools.json").read_text())["body"]
    namespace = next(tool for tool in body["tools"] if tool.get("name") == "mcp__lcm")
    assert "lcm_grep" in {tool["name"] for tool in namespace["tools"]}
    assert "tool_search" not in {tool["type"] for tool in body["tools"]}
    assert "lcm_grep" in {tool["name"] for tool in openai_responses.parse(body).tools}
