"""Refusals, in each wire's own error shape and status, with nothing stored."""

from __future__ import annotations

import anthropic
import httpx
import openai
import pytest

from conversations.models import Conversation, Message
from dropin.models import Thread
from tests.factories import UserFactory
from tests.support.fake_chat_completions_api import chat_completion
from tests.support.fake_messages_api import error
from tests.support.tokens import issue_token


def nothing_stored():
    assert Thread.objects.count() == 0
    assert Conversation.objects.count() == 0
    assert Message.objects.count() == 0


def test_an_unknown_model_is_a_404_listing_the_configured_names(upstreams, oai):
    with pytest.raises(openai.NotFoundError) as caught:
        oai.chat.completions.create(model="nope", messages=[{"role": "user", "content": "x"}])
    error = caught.value.body
    assert error["code"] == "model_not_found"
    assert error["param"] == "model"
    assert "configured models: offline, sonnet, haiku, gpt" in error["message"]
    assert "local" in error["message"]
    nothing_stored()


def test_an_unlisted_model_on_the_anthropic_wire_goes_upstream_unchanged(upstreams, claude):
    """The Anthropic wire passes a name the configuration does not list to its own
    upstream, unchanged; the upstream's refusal comes back as it came."""
    upstreams.messages.enqueue(error(404, "not_found_error", "model: nope"))
    with pytest.raises(anthropic.NotFoundError) as caught:
        claude.messages.create(
            model="nope", max_tokens=5, messages=[{"role": "user", "content": "x"}]
        )
    assert caught.value.body == {
        "type": "error",
        "error": {"type": "not_found_error", "message": "model: nope"},
    }
    assert upstreams.messages.requests[-1].body["model"] == "nope"


def test_a_missing_upstream_key_names_the_variable(upstreams, oai, claude, monkeypatch):
    monkeypatch.delenv("OPENAI_CHAT_API_KEY")
    with pytest.raises(openai.BadRequestError) as caught:
        oai.chat.completions.create(model="local", messages=[{"role": "user", "content": "x"}])
    assert caught.value.body["code"] == "missing_api_key"
    assert "OPENAI_CHAT_API_KEY" in caught.value.body["message"]
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude.messages.create(
            model="local", max_tokens=5, messages=[{"role": "user", "content": "x"}]
        )
    assert "OPENAI_CHAT_API_KEY" in caught.value.body["error"]["message"]
    assert upstreams.chat.requests == []
    nothing_stored()


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/openai/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}]}, "model"),
        ("/openai/v1/chat/completions", {"model": "local"}, "messages"),
        (
            "/openai/v1/chat/completions",
            {"model": "local", "messages": [{"role": "robot", "content": "x"}]},
            "messages[0].role",
        ),
        (
            "/openai/v1/chat/completions",
            {"model": "local", "messages": [{"role": "user", "content": "x"}], "stream": "yes"},
            "stream",
        ),
        (
            "/openai/v1/chat/completions",
            {"model": "local", "messages": [{"role": "user", "content": "x"}], "n": 3},
            "n",
        ),
        (
            "/anthropic/v1/messages",
            {"model": "local", "messages": [{"role": "user", "content": "x"}]},
            "max_tokens",
        ),
        (
            "/anthropic/v1/messages",
            {
                "model": "local",
                "max_tokens": 5,
                "messages": [{"role": "user", "content": [{"text": "a block without a type"}]}],
            },
            "messages.0.content.0.type",
        ),
        (
            "/anthropic/v1/messages",
            {
                "model": "local",
                "max_tokens": 5,
                "messages": [
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]}
                ],
            },
            "messages",
        ),
    ],
)
def test_a_malformed_body_is_a_400_naming_the_field(
    upstreams, live_server, caller, path, body, field
):
    response = httpx.post(
        live_server.url + path, json=body, headers={"Authorization": f"Bearer {caller[1]}"}
    )
    assert response.status_code == 400
    data = response.json()
    if path.startswith("/openai"):
        assert data["error"]["type"] == "invalid_request_error"
        assert data["error"]["param"] == field
    else:
        assert data["type"] == "error"
        assert data["error"]["type"] == "invalid_request_error"
        assert field.split(".")[0] in data["error"]["message"]
    nothing_stored()


def test_bad_json_and_an_oversized_body(upstreams, live_server, caller, settings):
    headers = {"x-api-key": caller[1], "content-type": "application/json"}
    response = httpx.post(live_server.url + "/anthropic/v1/messages", content=b"{", headers=headers)
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"
    settings.LCM_MAX_REQUEST_BYTES = 2048
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2048
    big = {"model": "local", "messages": [{"role": "user", "content": "x" * 5000}]}
    response = httpx.post(
        live_server.url + "/openai/v1/chat/completions",
        json=big,
        headers={"Authorization": f"Bearer {caller[1]}"},
    )
    assert response.status_code == 413
    assert response.json()["error"]["message"] == "the request body exceeds 2048 bytes"
    response = httpx.post(
        live_server.url + "/anthropic/v1/messages", json={**big, "max_tokens": 5}, headers=headers
    )
    assert response.status_code == 413
    assert response.json()["error"]["type"] == "request_too_large"
    nothing_stored()


def test_a_wrong_key_is_a_401(upstreams, live_server):
    for path, headers in (
        ("/openai/v1/chat/completions", {"Authorization": "Bearer nope"}),
        ("/anthropic/v1/messages", {"x-api-key": "nope"}),
        ("/openai/v1/chat/completions", {}),
    ):
        response = httpx.post(live_server.url + path, json={}, headers=headers)
        assert response.status_code == 401
    assert httpx.get(live_server.url + "/openai/v1/models").status_code == 401
    nothing_stored()


def test_another_users_conversation_key_is_a_404(upstreams, oai, live_server):
    upstreams.chat.enqueue(chat_completion("mine"))
    oai.chat.completions.create(
        model="local",
        messages=[{"role": "user", "content": "secret plan"}],
        extra_headers={"X-LCM-Conversation": "plans"},
    )
    stranger = openai.OpenAI(
        api_key=issue_token(UserFactory(username="stranger")),
        base_url=f"{live_server.url}/openai/v1",
        max_retries=0,
    )
    with pytest.raises(openai.NotFoundError) as caught:
        stranger.chat.completions.create(
            model="local",
            messages=[{"role": "user", "content": "secret plan"}],
            extra_headers={"X-LCM-Conversation": "plans"},
        )
    assert caught.value.body["message"] == "no conversation 'plans'"
    assert Message.objects.count() == 2
    assert Conversation.objects.count() == 1
    assert len(upstreams.chat.requests) == 1


def test_thinking_blocks_for_a_non_anthropic_model_are_refused(upstreams, claude):
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude.messages.create(
            model="local",
            max_tokens=5,
            messages=[
                {"role": "user", "content": "x"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                        {"type": "text", "text": "y"},
                    ],
                },
                {"role": "user", "content": "z"},
            ],
        )
    message = caught.value.body["error"]["message"]
    assert message.startswith("messages.1.content: thinking blocks can only be sent")
    assert "openai_chat" in message
    assert upstreams.chat.requests == []
    nothing_stored()
