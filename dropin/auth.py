"""Who is calling a drop-in endpoint: the SDK's key is the caller's LCM API token, sent as
`Authorization: Bearer KEY` (the openai SDK) or `x-api-key: KEY` (the anthropic SDK), or
named apart in `X-LCM-Token` (an agent whose own key goes in `Authorization`).

The one function that knows how tokens are checked (`user_for_key`), so that a change in how
tokens are stored touches this file only."""

from __future__ import annotations

from rest_framework.exceptions import AuthenticationFailed

from tokens.authentication import ApiTokenAuthentication

LCM_TOKEN_HEADER = "X-LCM-Token"


def key_from_headers(headers) -> str | None:
    """The caller's LCM token: `X-LCM-Token` when sent (the `Authorization` of such a
    request is the client's own upstream key, not ours), else the SDK's key."""
    named = (headers.get(LCM_TOKEN_HEADER) or "").strip()
    if named:
        return named
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
