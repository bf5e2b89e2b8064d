"""What the pipeline reads off an HTTP request before its wire parses the body: the JSON
body (size-checked), the calling LCM user, the conversation key and the memory-tools flag.
Each refusal is a `DropinError`, rendered in the calling wire's shape."""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import RequestDataTooBig

from dropin.auth import key_from_headers, user_for_key
from dropin.errors import DropinError

KEY_HEADER = "X-LCM-Conversation"
TOKEN_HEADER = "X-LCM-Token"
MAX_KEY_LENGTH = 200
_CREDENTIAL_HEADERS = ("Authorization", "x-api-key")


def json_body(request) -> dict:
    try:
        raw = request.body
    except RequestDataTooBig:
        raise _too_large() from None
    if len(raw) > settings.LCM_MAX_REQUEST_BYTES:
        raise _too_large()
    try:
        body = json.loads(raw or b"null")
    except (ValueError, UnicodeDecodeError):
        raise DropinError(
            400, "invalid_request", "the body is not valid JSON", param="body"
        ) from None
    if not isinstance(body, dict):
        raise DropinError(400, "invalid_request", "the body must be a JSON object", param="body")
    return body


def _too_large() -> DropinError:
    return DropinError(
        413, "too_large", f"the request body exceeds {settings.LCM_MAX_REQUEST_BYTES} bytes"
    )


@dataclass(frozen=True)
class Caller:
    user: object
    # True when the LCM user was named by X-LCM-Token and the client sent an x-api-key or
    # Authorization: its own upstream credential, forwarded unchanged (docs/drop-in.md).
    own_credentials: bool = False


def caller(request) -> Caller:
    """Who calls: `X-LCM-Token: <LCM token>` (the client's key, when it sends one, is then
    its upstream credential), else the SDK's key is the LCM token (server-held upstream
    keys)."""
    token = request.headers.get(TOKEN_HEADER)
    if token is not None:
        if not settings.LCM_DROPIN_CLIENT_CREDENTIALS:
            raise DropinError(
                403,
                "permission",
                f"{TOKEN_HEADER} is disabled on this server (LCM_DROPIN_CLIENT_CREDENTIALS): "
                "send the LCM token as the SDK's key",
            )
        user = user_for_key(token.strip())
        if user is None:
            raise DropinError(
                401, "authentication", f"invalid {TOKEN_HEADER}", code="invalid_api_key"
            )
        # Its own upstream credential, when it sent one; else the server's key (Codex with
        # no `env_key` sends none).
        own = any(request.headers.get(name) for name in _CREDENTIAL_HEADERS)
        return Caller(user, own_credentials=own)
    user = user_for_key(key_from_headers(request.headers))
    if user is None:
        raise DropinError(
            401,
            "authentication",
            "invalid API key: send an LCM API token as `Authorization: Bearer KEY` or "
            f"`x-api-key`, or as `{TOKEN_HEADER}` beside your own upstream key",
            code="invalid_api_key",
        )
    return Caller(user)


def conversation_key(request) -> str | None:
    key = request.headers.get(KEY_HEADER)
    if key is None:
        return None
    key = key.strip()
    if not key or len(key) > MAX_KEY_LENGTH:
        raise DropinError(
            400,
            "invalid_request",
            f"{KEY_HEADER} must be 1 to {MAX_KEY_LENGTH} characters",
            param=KEY_HEADER,
        )
    return key


def memory_tools_requested(request) -> bool:
    """`X-LCM-Tools: memory` (the only value known today), or the setting."""
    value = (request.headers.get("X-LCM-Tools") or "").strip().lower()
    return value == "memory" or settings.LCM_DROPIN_MEMORY_TOOLS
