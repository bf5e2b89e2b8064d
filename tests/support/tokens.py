"""API tokens for tests: the one place a test gets a token's raw key, so that how tokens
are stored can change without touching every test."""

from __future__ import annotations

import uuid


def issue_token(user, name: str | None = None) -> str:
    """A raw API key that authenticates `user`. Keys are stored hashed and cannot be read
    back, so each call issues a new token (for client `name`, by default a fresh name, so
    keys issued earlier in the test keep working).

    The token starts as just used: a token's last use is written at most once a minute
    (tokens/services.py), and tests that pin a request's query count pin that steady state,
    not the one write of a token's first request."""
    from django.utils import timezone

    from tokens.models import ApiToken
    from tokens.services import token_issue

    name = name or f"test-{uuid.uuid4().hex[:12]}"
    issued = token_issue(user=user, name=name, via="command", audited=False)
    ApiToken.objects.filter(pk=issued.token.pk).update(last_used_at=timezone.now())
    return issued.key
