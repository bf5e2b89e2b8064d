"""Refuse oversized request bodies before any of them is read (413, the one error shape),
and query strings holding NUL (400), which no text column can store."""

from __future__ import annotations

from django.conf import settings

from core.api.errors import json_error


def _name_with_nul(query) -> str | None:
    for key, values in query.lists():
        if "\x00" in key or any("\x00" in value for value in values):
            return key
    return None


class RequestSizeLimitMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        limit = settings.LCM_MAX_REQUEST_BYTES
        length = request.META.get("CONTENT_LENGTH")
        if length:
            try:
                too_big = int(length) > limit
            except ValueError:
                return json_error(400, "malformed_request", "Content-Length is not a number")
            if too_big:
                return json_error(
                    413,
                    "payload_too_large",
                    f"request body of {length} bytes is over the limit of {limit} bytes "
                    "(LCM_MAX_REQUEST_BYTES)",
                    {"limit": limit},
                )
        name = _name_with_nul(request.GET) if request.path.startswith("/api/") else None
        if name is not None:
            # PostgreSQL text cannot hold NUL: refuse it here, as the body parser does.
            return json_error(400, "invalid", f"{name} contains a NUL character", {"field": name})
        return self.get_response(request)
