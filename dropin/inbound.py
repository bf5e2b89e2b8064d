"""What the pipeline reads off an HTTP request before its wire parses the body: the JSON
body (size-checked), the calling LCM user, the conversation key and the memory-tools flag.
Each refusal is a `DropinError`, rendered in the calling wire's shape."""

from __future__ import annotations

import json

from django.conf import settings
from django.core.exceptions import RequestDataTooBig

from dropin.auth import key_from_headers, user_for_key
from dropin.errors import DropinError

KEY_HEADER = "X-LCM-Conversation"
MAX_KEY_LENGTH = 200


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


def caller(request):
    user = user_for_key(key_from_headers(request.headers))
    if user is None:
        raise DropinError(
            401,
            "authentication",
            "invalid API key: send an LCM API token as `Authorization: Bearer KEY` or `x-api-key`",
            code="invalid_api_key",
        )
    return user


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
