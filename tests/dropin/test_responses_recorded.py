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
    return record, response, received


def test_the_recordings_cover_each_kind_of_request():
    assert set(RECORDED) >= {
        "codex-first",
        "codex-tool-round",
        "codex-apply-patch-round",
        "codex-resume",
        "codex-compaction",
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
