"""Sub-agent expansion: offline excerpts, and the tool loop through the real anthropic SDK
against the local Messages-API server (tests/support/fake_messages_api.py)."""

from __future__ import annotations

import json

import pytest
from django.test import override_settings

from retrieval.models import DelegationGrant
from tests.factories import append_messages
from tests.retrieval.dag_builder import build_dag
from tests.support.fake_messages_api import (
    authentication_error,
    message,
    text_block,
    tool_use_block,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def model(monkeypatch, fake_messages_api):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_messages_api.base_url)
    return fake_messages_api


def expansion(api, **body):
    return api.post("/api/v1/expansions/", body, format="json")


def tool_results(request) -> list[dict]:
    return [b for b in request.body["messages"][-1]["content"] if b["type"] == "tool_result"]


def test_offline_expansion_returns_the_excerpt_and_revokes_the_grant(api, compacted):
    conversation, dag = compacted
    leaf = dag.leaves[1]
    response = expansion(api, prompt="what ran in 11-20?", summary_ids=[leaf.id])
    assert response.status_code == 200
    body = response.json()
    assert body["mode"] == "offline"
    assert body["cited_ids"] == [leaf.id]
    assert body["cited_message_ids"] == list(
        conversation.messages.filter(seq__range=(11, 20))
        .order_by("seq")
        .values_list("id", flat=True)
    )
    assert "Message 13: running the failing test" in body["answer"]
    grant = DelegationGrant.objects.get(pk=body["grant_id"])
    assert grant.revoked_at is not None and grant.revoke_reason == "completed"
    assert body["tokens_used"] == grant.tokens_used > 0


def test_offline_expansion_by_query_leads_with_the_matching_message(api, conversation):
    append_messages(conversation, 20)
    (fact,) = append_messages(
        conversation,
        1,
        start=20,
        payload=lambda i: {
            "role": "user",
            "content": "the staging database password rotates on Fridays",
        },
    )
    append_messages(conversation, 20, start=21)
    dag = build_dag(conversation, leaf_size=10, max_depth=1, tail=8)
    body = expansion(api, prompt="when does it rotate?", query="password rotates").json()
    assert body["cited_message_ids"][0] == fact.pk
    assert dag.top[0].id in body["cited_ids"]
    answer = body["answer"]
    assert answer.index("rotates on Fridays") < answer.index("[summary")  # evidence first


def test_offline_expansion_stays_within_its_token_cap(api, compacted):
    _, dag = compacted
    body = expansion(api, prompt="everything", summary_ids=[dag.top[0].id], token_cap=120).json()
    assert body["truncated"] is True
    assert 0 < body["tokens_used"] <= 120
    assert DelegationGrant.objects.get(pk=body["grant_id"]).tokens_used == body["tokens_used"]


def test_expansion_input_is_validated_and_nothing_is_granted(api, compacted):
    for body in [
        {"prompt": "", "summary_ids": ["sum_x"]},
        {"prompt": "why?"},
        {"prompt": "why?", "summary_ids": "sum_x"},
        {"prompt": "why?", "summary_ids": ["sum_x"], "max_answer_tokens": 10},
    ]:
        response = expansion(api, **body)
        assert response.status_code == 400, body
    assert expansion(api, prompt="why?", summary_ids=["sum_ffffffffffffffff"]).status_code == 404
    assert DelegationGrant.objects.count() == 0


def test_the_tool_loop_runs_through_the_sdk_within_the_grant(api, compacted, model):
    conversation, dag = compacted
    top, leaf = dag.top[0], dag.leaves[2]
    model.enqueue(
        message(content=[tool_use_block("lcm_describe", {"id": top.id})]),
        message(
            content=[
                text_block("Reading the third leaf."),
                tool_use_block(
                    "lcm_expand",
                    {"summary_id": leaf.id, "depth": 1, "include_messages": True},
                ),
            ]
        ),
        message(content=[tool_use_block("lcm_expand_query", {"prompt": "recurse"})]),
        message(f"Case 23 failed with TimeoutError after 30s (see {leaf.id})."),
    )
    body = expansion(api, prompt="What failed in case 23?", summary_ids=[top.id]).json()
    assert body["mode"] == "model"
    assert body["answer"] == f"Case 23 failed with TimeoutError after 30s (see {leaf.id})."
    assert body["cited_ids"] == [leaf.id]
    assert body["tool_calls"] == 3
    assert body["model_usage"] == {"input_tokens": 400, "output_tokens": 80}

    requests = model.requests
    assert len(requests) == 4
    first = requests[0].body
    assert [t["name"] for t in first["tools"]] == ["lcm_describe", "lcm_expand"]
    assert first["model"] == "claude-haiku-4-5"
    assert top.id in first["messages"][0]["content"]
    described = json.loads(tool_results(requests[1])[0]["content"])
    assert described["id"] == top.id and described["manifest"]["message_count"] == 40
    expanded = json.loads(tool_results(requests[2])[0]["content"])
    assert [m["seq"] for m in expanded["messages"]] == list(range(21, 31))
    refused = tool_results(requests[3])[0]
    assert refused["is_error"] is True
    assert "not available to an expansion sub-agent" in refused["content"]

    grant = DelegationGrant.objects.get(pk=body["grant_id"])
    assert grant.revoked_at is not None
    assert body["tokens_used"] == grant.tokens_used == top.token_count + expanded["token_estimate"]


def test_a_sub_agent_cannot_read_outside_its_grant(api, compacted, model):
    _, dag = compacted
    granted, other = dag.leaves[0], dag.leaves[1]
    model.enqueue(
        message(content=[tool_use_block("lcm_expand", {"summary_id": other.id})]),
        message("I could not read it."),
    )
    body = expansion(api, prompt="?", summary_ids=[granted.id]).json()
    result = tool_results(model.requests[1])[0]
    assert result["is_error"] is True
    assert json.loads(result["content"])["code"] == "outside_grant"
    assert body["tokens_used"] == 0


@override_settings(LCM_EXPANSION_MAX_TOOL_CALLS=2)
def test_the_tool_call_budget_forces_an_answer(api, compacted, model):
    _, dag = compacted
    leaf = dag.leaves[0]

    def respond(request):
        if request.body.get("tool_choice", {}).get("type") == "none":
            return message("Final answer from what I read.")
        return message(content=[tool_use_block("lcm_describe", {"id": leaf.id})])

    model.enqueue(*[respond] * 4)
    body = expansion(api, prompt="?", summary_ids=[leaf.id]).json()
    assert body["answer"] == "Final answer from what I read."
    assert body["tool_calls"] == 2
    assert len(model.requests) == 3
    assert model.requests[2].body["tool_choice"] == {"type": "none"}


def test_a_model_failure_is_a_503_and_the_grant_is_still_revoked(api, compacted, model):
    _, dag = compacted
    model.enqueue(authentication_error())
    response = expansion(api, prompt="?", summary_ids=[dag.top[0].id])
    assert response.status_code == 503
    assert response.json()["code"] == "expansion_model_failed"
    grant = DelegationGrant.objects.get()
    assert grant.revoked_at is not None and grant.revoke_reason == "failed"
