"""Sub-agent expansion on any configured model (LCM_EXPANSION_PROVIDER_MODEL): the tool loop
answered by an `openai_chat` model through the real `openai` SDK over local HTTP to the fake
Chat Completions server. Nothing of ours is mocked."""

from __future__ import annotations

import json

import pytest
from django.test import override_settings

from retrieval.models import DelegationGrant
from tests.support.fake_chat_completions_api import chat_completion, chat_error, tool_call

pytestmark = pytest.mark.django_db


@pytest.fixture
def local(local_chat_model, settings):
    settings.LCM_EXPANSION_PROVIDER_MODEL = "local"
    return local_chat_model


def expansion(api, **body):
    return api.post("/api/v1/expansions/", body, format="json")


def tool_messages(request) -> list[dict]:
    return [m for m in request.body["messages"] if m["role"] == "tool"]


def test_the_tool_loop_is_answered_by_an_openai_chat_model(api, compacted, local, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    _, dag = compacted
    top, leaf = dag.top[0], dag.leaves[2]
    local.enqueue(
        chat_completion(None, tool_calls=[tool_call("lcm_describe", {"id": top.id}, "call_1")]),
        chat_completion(
            "Reading the third leaf.",
            tool_calls=[
                tool_call(
                    "lcm_expand",
                    {"summary_id": leaf.id, "depth": 1, "include_messages": True},
                    "call_2",
                )
            ],
        ),
        chat_completion(f"Case 23 failed with TimeoutError after 30s (see {leaf.id})."),
    )

    body = expansion(api, prompt="What failed in case 23?", summary_ids=[top.id]).json()

    assert body["mode"] == "model"
    assert body["answer"] == f"Case 23 failed with TimeoutError after 30s (see {leaf.id})."
    assert body["cited_ids"] == [leaf.id]
    assert body["tool_calls"] == 2
    assert body["model_usage"] == {"input_tokens": 36, "output_tokens": 15}
    requests = local.requests
    assert len(requests) == 3
    first = requests[0].body
    assert first["model"] == "llama-fake"
    assert requests[0].headers["authorization"] == "Bearer sk-test-chat-key"
    assert [t["function"]["name"] for t in first["tools"]] == ["lcm_describe", "lcm_expand"]
    assert first["messages"][0]["role"] == "system"
    assert top.id in first["messages"][1]["content"]
    [described] = tool_messages(requests[1])
    assert described["tool_call_id"] == "call_1"
    assert json.loads(described["content"])["id"] == top.id
    expanded = json.loads(tool_messages(requests[2])[1]["content"])
    assert [m["seq"] for m in expanded["messages"]] == list(range(21, 31))
    grant = DelegationGrant.objects.get(pk=body["grant_id"])
    assert grant.revoked_at is not None


@override_settings(LCM_EXPANSION_MAX_TOOL_CALLS=1)
def test_the_tool_call_budget_forces_an_answer_on_the_chat_wire(api, compacted, local):
    _, dag = compacted
    leaf = dag.leaves[0]

    def respond(request):
        if request.body.get("tool_choice") == "none":
            return chat_completion("Final answer from what I read.")
        return chat_completion(None, tool_calls=[tool_call("lcm_describe", {"id": leaf.id})])

    local.enqueue(*[respond] * 3)
    body = expansion(api, prompt="?", summary_ids=[leaf.id]).json()
    assert body["answer"] == "Final answer from what I read."
    assert len(local.requests) == 2
    assert local.requests[1].body["tool_choice"] == "none"


def test_a_missing_key_is_a_503_naming_the_variable_and_nothing_is_granted(
    api, compacted, local, monkeypatch
):
    monkeypatch.delenv("OPENAI_CHAT_API_KEY")
    _, dag = compacted
    response = expansion(api, prompt="?", summary_ids=[dag.top[0].id])
    assert response.status_code == 503
    assert response.json()["code"] == "missing_api_key"
    assert "OPENAI_CHAT_API_KEY" in response.json()["message"]
    assert not DelegationGrant.objects.exists()
    assert local.requests == []


def test_an_unknown_model_is_a_503_naming_the_setting(api, compacted, settings):
    settings.LCM_EXPANSION_PROVIDER_MODEL = "nope"
    _, dag = compacted
    response = expansion(api, prompt="?", summary_ids=[dag.top[0].id])
    assert response.status_code == 503
    assert response.json()["code"] == "unknown_model"
    assert "LCM_EXPANSION_PROVIDER_MODEL" in response.json()["message"]
    assert not DelegationGrant.objects.exists()


def test_a_chat_server_failure_is_a_503_and_the_grant_is_revoked(api, compacted, local):
    _, dag = compacted
    local.enqueue(chat_error(401, "invalid_request_error", "invalid_api_key", "bad key"))
    response = expansion(api, prompt="?", summary_ids=[dag.top[0].id])
    assert response.status_code == 503
    assert response.json()["code"] == "expansion_model_failed"
    grant = DelegationGrant.objects.get()
    assert grant.revoked_at is not None and grant.revoke_reason == "failed"


def test_the_offline_model_gives_the_offline_excerpt(api, compacted, settings, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant")
    settings.LCM_EXPANSION_PROVIDER_MODEL = "offline"
    _, dag = compacted
    body = expansion(api, prompt="?", summary_ids=[dag.leaves[0].id]).json()
    assert body["mode"] == "offline"
