"""Who is calling the MCP endpoint: the API token, sent as `Authorization: Token KEY`
(as for /api/v1/) or `Authorization: Bearer KEY` (what MCP clients send)."""

from __future__ import annotations

from django.db import close_old_connections
from rest_framework.authtoken.models import Token

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
    """The active user owning `key`, or None."""
    close_old_connections()
    try:
        row = (
            Token.objects.filter(key=key, user__is_active=True)
            .values_list("user_id", flat=True)
            .first()
        )
    finally:
        close_old_connections()
    return row
