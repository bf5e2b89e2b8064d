"""Who is calling a drop-in endpoint: the SDK's key is the caller's LCM API token, sent as
`Authorization: Bearer KEY` (the openai SDK) or `x-api-key: KEY` (the anthropic SDK).

The one function that knows how tokens are checked (`user_for_key`), so that a change in how
tokens are stored touches this file only."""

from __future__ import annotations

from rest_framework.exceptions import AuthenticationFailed

from tokens.authentication import ApiTokenAuthentication


def key_from_headers(headers) -> str | None:
    value = (headers.get("authorization") or "").strip()
    keyword, _, key = value.partition(" ")
    if keyword.lower() in ("bearer", "token") and key.strip() and " " not in key.strip():
        return key.strip()
    key = (headers.get("x-api-key") or "").strip()
    return key or None


def user_for_key(key: str | None):
    """The active user owning the API token `key`, or None."""
    if not key:
        return None
    try:
        user, _ = ApiTokenAuthentication().authenticate_credentials(key)
    except AuthenticationFailed:
        return None
    return user
