"""API tokens for tests: the one place a test gets a token's raw key, so that how tokens
are stored can change without touching every test."""

from __future__ import annotations

import uuid


def issue_token(user, name: str | None = None) -> str:
    """A raw API key that authenticates `user`. Keys are stored hashed and cannot be read
    back, so each call issues a new token (for client `name`, by default a fresh name, so
    keys issued earlier in the test keep working)."""
    from tokens.services import token_issue

    name = name or f"test-{uuid.uuid4().hex[:12]}"
    return token_issue(user=user, name=name, via="command", audited=False).key
