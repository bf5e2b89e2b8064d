"""Secrets at ingest, as a user manages them: the policy of a user and of a conversation
(set, read with what it inherits), and the findings listed for review.

A change of policy is audited (a switch to `off` lets secrets in).
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from conversations.models import Conversation, OwnerSecretPolicy, SecretFinding
from conversations.secret_guard import server_policy
from core.api.errors import NotFound
from core.audit import audit_record


def owner_policy(*, user) -> dict:
    own = OwnerSecretPolicy.objects.filter(owner=user).values_list("policy", flat=True).first()
    return {"policy": own, "server": server_policy(), "effective": own or server_policy()}


def conversation_policy(*, conversation: Conversation) -> dict:
    owner = owner_policy(user=conversation.owner)["policy"]
    own = conversation.secret_policy or None
    return {
        "policy": own,
        "owner": owner,
        "server": server_policy(),
        "effective": own or owner or server_policy(),
    }


def _audit(*, actor, request, target_kind: str, target_id, policy, was) -> None:
    audit_record(
        action="secret_policy_set",
        via="api" if request is not None else "admin",
        actor=actor,
        target_kind=target_kind,
        target_id=target_id,
        request=request,
        details={"policy": policy, "was": was},
    )


def owner_policy_set(*, user, policy: str | None, request=None) -> dict:
    """Set (or, with None, remove) the user's own policy."""
    with transaction.atomic():
        was = owner_policy(user=user)["policy"]
        if policy is None:
            OwnerSecretPolicy.objects.filter(owner=user).delete()
        else:
            OwnerSecretPolicy.objects.update_or_create(owner=user, defaults={"policy": policy})
        if policy != was:
            _audit(actor=user, request=request, target_kind="user", target_id=user.pk,
                   policy=policy, was=was)  # fmt: skip
    return owner_policy(user=user)


def conversation_policy_set(
    *, conversation: Conversation, policy: str | None, actor, request=None
) -> dict:
    """Set (or, with None, clear) the conversation's own policy."""
    with transaction.atomic():
        was = conversation.secret_policy or None
        Conversation.objects.filter(pk=conversation.pk).update(secret_policy=policy or "")
        conversation.secret_policy = policy or ""
        if policy != was:
            _audit(actor=actor, request=request, target_kind="conversation",
                   target_id=conversation.pk, policy=policy, was=was)  # fmt: skip
    return conversation_policy(conversation=conversation)


def findings_for_user(
    *,
    user,
    conversation_id: int | None = None,
    action: str | None = None,
    reviewed: bool | None = None,
) -> QuerySet[SecretFinding]:
    """The findings in the user's own conversations, newest first."""
    queryset = SecretFinding.objects.filter(conversation__owner=user)
    if conversation_id is not None:
        queryset = queryset.filter(conversation_id=conversation_id)
    if action is not None:
        queryset = queryset.filter(action=action)
    if reviewed is not None:
        queryset = queryset.filter(reviewed_at__isnull=not reviewed)
    return queryset.select_related("message")


def finding_review(*, user, finding_id: int) -> SecretFinding:
    """Mark one of the user's findings as reviewed (idempotent: the first review stays)."""
    finding = findings_for_user(user=user).filter(pk=finding_id).first()
    if finding is None:
        raise NotFound(f"secret finding {finding_id} not found")
    if finding.reviewed_at is None:
        finding.reviewed_at, finding.reviewed_by = timezone.now(), user
        SecretFinding.objects.filter(pk=finding.pk, reviewed_at__isnull=True).update(
            reviewed_at=finding.reviewed_at, reviewed_by=user
        )
    return finding
