"""Who is calling the MCP endpoint: the API token, sent as `Authorization: Token KEY`
(as for /api/v1/) or `Authorization: Bearer KEY` (what MCP clients send), checked by the
tokens app (hashed keys, expiry, revocation)."""

from __future__ import annotations

from django.db import close_old_connections

from tokens.services import token_authenticate

KEYWORDS = ("token", "bearer")


def token_from_header(value: str | None) -> str | None:
    if not value:
        return None
    keyword, _, key = value.strip().partition(" ")
    key = key.strip()
    if keyword.lower() not in KEYWORDS or not key or " " in key:
        return None
    return key


def user_id_for_token(key: str) -> int | None:
    """The active user owning the live token `key`, or None."""
    close_old_connections()
    try:
        token = token_authenticate(key)
    finally:
        close_old_connections()
    return token.user_id if token is not None else None
