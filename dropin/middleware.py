"""Oversized bodies on the drop-in paths are refused in the calling wire's error shape (413),
before any of them is read; `core.api.middleware` does the same for every other path in
the API's shape. This middleware stands before it in MIDDLEWARE."""

from __future__ import annotations

from django.conf import settings
from django.http import JsonResponse

from dropin.errors import DropinError
from dropin.wires import anthropic as wire_anthropic
from dropin.wires import openai_chat as wire_openai

PREFIXES = {"/openai/": wire_openai, "/anthropic/": wire_anthropic}


class DropinBodyLimitMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        wire = next((w for p, w in PREFIXES.items() if request.path.startswith(p)), None)
        length = request.META.get("CONTENT_LENGTH")
        if wire is not None and length and length.isdigit():
            limit = settings.LCM_MAX_REQUEST_BYTES
            if int(length) > limit:
                error = DropinError(413, "too_large", f"the request body exceeds {limit} bytes")
                return JsonResponse(wire.error_body(error), status=413)
        return self.get_response(request)
