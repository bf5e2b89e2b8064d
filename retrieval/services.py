"""Writes of the retrieval app: delegation grants (create, charge, revoke) and the
grant-bound reads a sub-agent is allowed (describe and expand, clamped to the grant).

Every write is one short statement in its own transaction; nothing here is held open
across a model call. Charging is a compare-and-set UPDATE, so concurrent tool calls on
one grant cannot spend past its cap.
"""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Sequence

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from conversations.models import Summary
from core.api.errors import InvalidInput, LcmError, NotFound
from core.token_estimate import estimate
from largefiles.models import LargeFile
from retrieval import dag, selectors
from retrieval.models import DelegationGrant, GrantState


class GrantRefused(LcmError):
    """The grant is expired, revoked or used up, or the id lies outside it."""

    status = 403
    code = "grant_refused"


def grant_create(
    *,
    owner,
    conversation_ids: Sequence[int],
    summary_ids: Sequence[str] = (),
    token_cap: int,
    max_depth: int = selectors.MAX_EXPAND_DEPTH,
    ttl_seconds: int | None = None,
    prompt: str = "",
) -> DelegationGrant:
    if not conversation_ids:
        raise InvalidInput("a grant needs at least one conversation")
    if token_cap < 1:
        raise InvalidInput("token_cap must be a positive integer", extra={"field": "token_cap"})
    if not 1 <= max_depth <= selectors.MAX_EXPAND_DEPTH:
        raise InvalidInput(
            f"max_depth must be from 1 to {selectors.MAX_EXPAND_DEPTH}",
            extra={"field": "max_depth"},
        )
    now = timezone.now()
    ttl = ttl_seconds if ttl_seconds is not None else settings.LCM_EXPANSION_GRANT_TTL_SECONDS
    with transaction.atomic():
        return DelegationGrant.objects.create(
            id="grant_" + secrets.token_hex(8),
            owner=owner,
            conversation_ids=sorted({int(c) for c in conversation_ids}),
            summary_ids=list(dict.fromkeys(summary_ids)),
            max_depth=max_depth,
            token_cap=token_cap,
            prompt=prompt,
            created_at=now,
            expires_at=now + dt.timedelta(seconds=ttl),
        )


def grant_revoke(*, grant_id: str, reason: str = "completed") -> bool:
    """Revoke once; a second call (or a revoked grant) changes nothing."""
    with transaction.atomic():
        return bool(
            DelegationGrant.objects.filter(pk=grant_id, revoked_at__isnull=True).update(
                revoked_at=timezone.now(), revoke_reason=reason[:64]
            )
        )


def grant_sweep_expired() -> int:
    """Revoke every grant past its expiry that nobody revoked (a crashed expansion)."""
    with transaction.atomic():
        return DelegationGrant.objects.filter(
            revoked_at__isnull=True, expires_at__lte=timezone.now()
        ).update(revoked_at=timezone.now(), revoke_reason="expired")


def grant_get_for_user(*, user, grant_id: str) -> DelegationGrant:
    grant = DelegationGrant.objects.filter(pk=grant_id).first()
    if grant is None or (grant.owner_id != user.pk and not user.is_staff):
        raise NotFound(f"grant {grant_id} not found")
    return grant


def _refuse(grant: DelegationGrant, state: GrantState) -> GrantRefused:
    messages = {
        GrantState.REVOKED: f"grant {grant.pk} was revoked ({grant.revoke_reason})",
        GrantState.EXPIRED: f"grant {grant.pk} expired at {grant.expires_at.isoformat()}",
        GrantState.EXHAUSTED: f"grant {grant.pk} has used all {grant.token_cap} tokens",
    }
    return GrantRefused(
        messages[state],
        code=f"grant_{state.value}",
        extra={"grant_id": grant.pk, "tokens_used": grant.tokens_used},
    )


def grant_require_active(grant: DelegationGrant) -> None:
    state = grant.state(timezone.now())
    if state is not GrantState.ACTIVE:
        raise _refuse(grant, state)


def grant_charge(*, grant: DelegationGrant, tokens: int) -> None:
    """Spend `tokens` of the grant, or refuse if it is no longer active or too small."""
    if tokens <= 0:
        grant_require_active(grant)
        return
    with transaction.atomic():
        charged = DelegationGrant.objects.filter(
            pk=grant.pk,
            revoked_at__isnull=True,
            expires_at__gt=timezone.now(),
            tokens_used__lte=F("token_cap") - tokens,
        ).update(tokens_used=F("tokens_used") + tokens)
    grant.refresh_from_db()
    if not charged:
        state = grant.state(timezone.now())
        raise _refuse(grant, GrantState.EXHAUSTED if state is GrantState.ACTIVE else state)


def _require_in_grant(grant: DelegationGrant, summary: Summary) -> None:
    inside = summary.conversation_id in grant.conversation_ids
    if inside and grant.summary_ids:
        inside = bool(set(dag.ancestor_ids(summary.pk)) & set(grant.summary_ids))
    if not inside:
        raise GrantRefused(
            f"{summary.pk} lies outside grant {grant.pk}",
            code="outside_grant",
            extra={"grant_id": grant.pk},
        )


def grant_expand(
    *,
    grant: DelegationGrant,
    summary_id: str,
    depth: int = 1,
    include_messages: bool = False,
    token_cap: int | None = None,
) -> selectors.ExpandResult:
    """Expand within the grant: depth and token cap are clamped to what the grant allows,
    and what was returned is charged to it."""
    grant_require_active(grant)
    summary = Summary.objects.filter(pk=summary_id).first()
    if summary is None:
        raise NotFound(f"summary {summary_id} not found")
    _require_in_grant(grant, summary)
    depth = max(1, min(depth, grant.max_depth))
    cap = min(token_cap or grant.tokens_remaining, grant.tokens_remaining)
    if cap < 1:
        raise _refuse(grant, GrantState.EXHAUSTED)
    result = selectors.expand_summary(
        summary, depth=depth, include_messages=include_messages, token_cap=cap
    )
    grant_charge(grant=grant, tokens=result.token_estimate)
    return result


def grant_describe(*, grant: DelegationGrant, item_id: str) -> dict:
    """Describe within the grant; the text handed over (summary content, file exploration
    summary) is charged to it."""
    grant_require_active(grant)
    if item_id.startswith("file_"):
        large_file = LargeFile.objects.filter(
            pk=item_id, conversation_id__in=grant.conversation_ids
        ).first()
        if large_file is None:
            raise NotFound(f"file {item_id} not found")
        grant_charge(grant=grant, tokens=estimate(large_file.exploration_summary))
        return selectors.describe_file(large_file)
    summary = Summary.objects.filter(pk=item_id).select_related("fidelity").first()
    if summary is None:
        raise NotFound(f"{item_id} not found")
    _require_in_grant(grant, summary)
    grant_charge(grant=grant, tokens=min(summary.token_count, grant.tokens_remaining))
    return selectors.describe_summary(summary)
