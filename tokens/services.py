"""Writes to API tokens: issue, rotate, revoke, and the per-request check.

Every issue, rotation and revocation is audited through `core.audit` (the security app's
writer), in the same transaction. The raw key is returned once, by `token_issue` and
`token_rotate`, and never stored."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone

from core.audit import audit_record
from tokens.models import ApiToken

KEY_PREFIX = "lcm_"
PREFIX_LENGTH = 12  # "lcm_" and 8 random characters: enough to tell tokens apart
# last_used_at is written at most this often per token, so a busy client does not turn
# every read into a write.
LAST_USED_RESOLUTION = timedelta(seconds=60)


class TokenError(Exception):
    """A token operation that cannot be done (no such token, a name already in use)."""


def key_digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def key_prefix(key: str) -> str:
    return key[:PREFIX_LENGTH]


def _new_key() -> str:
    # 30 random bytes, URL-safe base64: 40 characters after the prefix, 240 bits.
    return KEY_PREFIX + secrets.token_urlsafe(30)


def _default_expiry(days: int | None) -> datetime | None:
    days = settings.LCM_TOKEN_DEFAULT_DAYS if days is None else days
    return timezone.now() + timedelta(days=days) if days > 0 else None


@dataclass(frozen=True)
class IssuedToken:
    token: ApiToken
    key: str  # the raw key: shown once, never stored


def _audit(action: str, token: ApiToken, *, via: str, actor=None, request=None) -> None:
    audit_record(
        action=action,
        via=via,
        actor=actor,
        request=request,
        target_kind="api_token",
        target_id=token.pk,
        details={"user_id": token.user_id, "prefix": token.prefix, "name": token.name},
    )


def token_issue(
    *,
    user,
    name: str = "default",
    days: int | None = None,
    via: str = "command",
    actor=None,
    audited: bool = True,
) -> IssuedToken:
    """A new token for `user` and client `name`; refused if a live one has that name
    (rotate it instead). `days`: lifetime (None: LCM_TOKEN_DEFAULT_DAYS; 0: never expires).
    `audited=False` only for test fixtures (tests/support/tokens.py), whose tokens are
    set-up, not actions, and would otherwise show in every test's audit log."""
    name = name.strip()
    if not name:
        raise TokenError("a token needs a client name")
    key = _new_key()
    try:
        with transaction.atomic():
            token = ApiToken.objects.create(
                user=user,
                name=name,
                prefix=key_prefix(key),
                digest=key_digest(key),
                expires_at=_default_expiry(days),
            )
            if audited:
                _audit("token_issue", token, via=via, actor=actor)
    except IntegrityError:
        raise TokenError(
            f"user {user.get_username()} already has a live token named {name!r}: "
            "rotate or revoke it"
        ) from None
    return IssuedToken(token=token, key=key)


def token_rotate(
    *, user, name: str = "default", days: int | None = None, via: str = "command", actor=None
) -> IssuedToken:
    """Revoke the live token named `name` (if any) and issue its replacement, atomically.
    Rotations of one user's tokens are serialized on the user's row (on PostgreSQL; SQLite
    serializes writers anyway), so racing rotations leave exactly one live token."""
    with transaction.atomic():
        get_user_model().objects.select_for_update().filter(pk=user.pk).first()
        now = timezone.now()
        live = list(
            ApiToken.objects.select_for_update().filter(
                user=user, name=name, revoked_at__isnull=True
            )
        )
        for old in live:
            ApiToken.objects.filter(pk=old.pk, revoked_at__isnull=True).update(revoked_at=now)
            _audit("token_revoke", old, via=via, actor=actor)
        key = _new_key()
        token = ApiToken.objects.create(
            user=user,
            name=name,
            prefix=key_prefix(key),
            digest=key_digest(key),
            expires_at=_default_expiry(days),
        )
        _audit("token_rotate", token, via=via, actor=actor)
    return IssuedToken(token=token, key=key)


def token_revoke(*, token: ApiToken, via: str = "command", actor=None) -> bool:
    """Revoke `token`; False when it was already revoked."""
    with transaction.atomic():
        changed = ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
        if changed:
            _audit("token_revoke", token, via=via, actor=actor)
    return bool(changed)


def token_authenticate(key: str) -> ApiToken | None:
    """The live, unexpired token of an active user whose key is `key` (with `user`
    loaded), or None. One indexed read; a write at most once a minute (last use)."""
    if not key or len(key) > 256:
        return None
    try:
        # The digest is unique: one row by index, its user joined, no ordering.
        token = ApiToken.objects.select_related("user").get(digest=key_digest(key))
    except ApiToken.DoesNotExist:
        return None
    now = timezone.now()
    if token.revoked_at is not None or not token.user.is_active:
        return None
    if token.expires_at is not None and token.expires_at <= now:
        return None
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token
