"""Delegation grants: scope, clamping, exhaustion, expiry, revocation, and concurrent spend."""

from __future__ import annotations

import datetime as dt
import json
from functools import partial

import pytest
from django.core.management import call_command
from django.db import IntegrityError, transaction
from django.utils import timezone

from conversations.models import Message
from retrieval import services
from retrieval.models import DelegationGrant
from tests.factories import append_messages
from tests.retrieval.dag_builder import build_dag
from tests.support.concurrent import run_together

pytestmark = pytest.mark.django_db


def grant_for(user, conversation, **kwargs):
    kwargs.setdefault("token_cap", 10_000)
    return services.grant_create(owner=user, conversation_ids=[conversation.pk], **kwargs)


def test_a_grant_clamps_depth_and_tokens(user, compacted):
    conversation, dag = compacted
    grant = grant_for(user, conversation, max_depth=1, token_cap=150)
    result = services.grant_expand(
        grant=grant, summary_id=dag.top[0].id, depth=5, include_messages=True, token_cap=10**6
    )
    assert result.depth == 1  # clamped to the grant's depth
    assert result.token_cap == 150  # clamped to what remains
    assert result.token_estimate <= 150 and result.truncated is True
    grant.refresh_from_db()
    assert grant.tokens_used == result.token_estimate


def test_an_exhausted_grant_is_an_error(user, compacted):
    conversation, dag = compacted
    grant = grant_for(user, conversation, token_cap=80)
    services.grant_expand(grant=grant, summary_id=dag.top[0].id, depth=1)  # 4 leaves x 20
    assert grant.tokens_used == 80
    with pytest.raises(services.GrantRefused) as caught:
        services.grant_expand(grant=grant, summary_id=dag.leaves[0].id)
    assert caught.value.code == "grant_exhausted" and caught.value.status == 403
    grant.refresh_from_db()
    assert grant.tokens_used == 80


def test_an_expired_grant_is_refused(user, compacted):
    conversation, dag = compacted
    grant = grant_for(user, conversation)
    DelegationGrant.objects.filter(pk=grant.pk).update(
        created_at=timezone.now() - dt.timedelta(hours=2),
        expires_at=timezone.now() - dt.timedelta(seconds=1),
    )
    grant.refresh_from_db()
    with pytest.raises(services.GrantRefused) as caught:
        services.grant_expand(grant=grant, summary_id=dag.top[0].id)
    assert caught.value.code == "grant_expired"
    assert DelegationGrant.objects.get(pk=grant.pk).tokens_used == 0


def test_a_revoked_grant_is_refused_and_revocation_happens_once(user, compacted):
    conversation, dag = compacted
    grant = grant_for(user, conversation)
    assert services.grant_revoke(grant_id=grant.pk, reason="cancelled") is True
    assert services.grant_revoke(grant_id=grant.pk, reason="again") is False
    grant.refresh_from_db()
    assert grant.revoke_reason == "cancelled"
    with pytest.raises(services.GrantRefused) as caught:
        services.grant_describe(grant=grant, item_id=dag.top[0].id)
    assert caught.value.code == "grant_revoked"


def test_a_grant_scoped_to_summaries_refuses_others(user, compacted):
    conversation, dag = compacted
    first, second = dag.leaves[0], dag.leaves[1]
    grant = grant_for(user, conversation, summary_ids=[first.id])
    assert services.grant_expand(grant=grant, summary_id=first.id, include_messages=True).messages
    with pytest.raises(services.GrantRefused) as caught:
        services.grant_expand(grant=grant, summary_id=second.id)
    assert caught.value.code == "outside_grant"
    with pytest.raises(services.GrantRefused):
        services.grant_expand(grant=grant, summary_id=dag.top[0].id)  # above the grant


def test_a_grant_never_reaches_another_conversation(user, compacted, make_conversation):
    conversation, _ = compacted
    other = make_conversation(messages=30)
    other_dag = build_dag(other, leaf_size=10, max_depth=0, tail=5)
    grant = grant_for(user, conversation)
    with pytest.raises(services.GrantRefused):
        services.grant_expand(grant=grant, summary_id=other_dag.leaves[0].id)


def test_sweep_revokes_only_expired_grants(user, compacted, capsys):
    conversation, _ = compacted
    live = grant_for(user, conversation)
    stale = grant_for(user, conversation)
    DelegationGrant.objects.filter(pk=stale.pk).update(
        created_at=timezone.now() - dt.timedelta(hours=2),
        expires_at=timezone.now() - dt.timedelta(hours=1),
    )
    call_command("lcm", "sweep-grants")
    assert json.loads(capsys.readouterr().out) == {"revoked": 1}
    assert DelegationGrant.objects.get(pk=stale.pk).revoke_reason == "expired"
    assert DelegationGrant.objects.get(pk=live.pk).revoked_at is None


def test_the_database_refuses_spending_past_the_cap(user, compacted):
    conversation, _ = compacted
    grant = grant_for(user, conversation, token_cap=10)
    with pytest.raises(IntegrityError), transaction.atomic():
        DelegationGrant.objects.filter(pk=grant.pk).update(tokens_used=11)


def test_expand_api_inside_a_grant_is_clamped_and_owner_only(api, other_api, user, compacted):
    conversation, dag = compacted
    grant = grant_for(user, conversation, max_depth=1, token_cap=100)
    body = {"summary_id": dag.top[0].id, "depth": 3, "grant_id": grant.pk}
    response = api.post("/api/v1/expand/", body, format="json")
    assert response.status_code == 200
    assert response.json()["depth"] == 1
    assert other_api.post("/api/v1/expand/", body, format="json").status_code == 404
    services.grant_revoke(grant_id=grant.pk)
    refused = api.post("/api/v1/expand/", body, format="json")
    assert refused.status_code == 403
    assert refused.json()["code"] == "grant_revoked"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_spends_on_one_grant_never_pass_its_cap(user, conversation):
    append_messages(conversation, 48)
    dag = build_dag(conversation, leaf_size=10, fanout=4, max_depth=1, tail=8)
    leaf_tokens = sum(
        Message.objects.filter(summary_links__summary=dag.leaves[0]).values_list(
            "token_count", flat=True
        )
    )
    grant = grant_for(user, conversation, token_cap=leaf_tokens * 3)
    # Each racer spends through its own copy of the grant, read before any of them spends.
    copies = [DelegationGrant.objects.get(pk=grant.pk) for _ in range(8)]

    def spend(own: DelegationGrant) -> str:
        try:
            result = services.grant_expand(
                grant=own, summary_id=dag.leaves[0].id, include_messages=True, token_cap=leaf_tokens
            )
            return "ok" if not result.truncated else "partial"
        except services.GrantRefused as error:
            return error.code

    outcomes = run_together(*(partial(spend, own) for own in copies))
    grant.refresh_from_db()
    # Every thread read the grant while it was untouched, so each expanded a full leaf;
    # the compare-and-set charge let exactly three of them through.
    assert sorted(outcomes) == ["grant_exhausted"] * 5 + ["ok"] * 3
    assert grant.tokens_used == grant.token_cap == leaf_tokens * 3
