"""API tokens for tests: the one place a test gets a token's raw key, so that how tokens
are stored can change without touching every test."""

from __future__ import annotations

from rest_framework.authtoken.models import Token


def issue_token(user) -> str:
    """A raw API key that authenticates `user` (created on first use)."""
    token, _ = Token.objects.get_or_create(user=user)
    return token.key
