"""Oversized bodies on the drop-in paths are refused in the calling wire's error shape (413),
before any of them is read; `core.api.middleware` does the same for every other path in
the API's shape. This middleware stands before it in MIDDLEWARE.

Every other refusal under a drop-in prefix that is not already the wire's JSON (an unknown
path's 404, a wrong method's 405) is answered in the wire's shape too: a client of the
wire (Codex, an SDK) parses the body as the wire's error, never an HTML page."""

from __future__ import annotations

from django.conf import settings
from django.http import JsonResponse

from dropin.errors import DropinError
from dropin.wires import anthropic as wire_anthropic
from dropin.wires import openai_chat as wire_openai
from dropin.wires import openai_responses

PREFIXES = {"/openai/": wire_openai, "/anthropic/": wire_anthropic}
# Under /openai/, the Responses endpoints answer in the Responses wire's shape.
RESPONSES_PREFIX = "/openai/v1/responses"


class DropinBodyLimitMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        wire = next((w for p, w in PREFIXES.items() if request.path.startswith(p)), None)
        if request.path.startswith(RESPONSES_PREFIX):
            wire = openai_responses
        length = request.META.get("CONTENT_LENGTH")
        if wire is not None and length and length.isdigit():
            limit = settings.LCM_MAX_REQUEST_BYTES
            if int(length) > limit:
                error = DropinError(413, "too_large", f"the request body exceeds {limit} bytes")
                return JsonResponse(wire.error_body(error), status=413)
        response = self.get_response(request)
        if wire is not None and response.status_code >= 400 and not _is_json(response):
            return _in_wire_shape(wire, request, response)
        return response


def _is_json(response) -> bool:
    return (response.get("Content-Type") or "").startswith("application/json")


_KINDS = {401: "authentication", 404: "not_found", 413: "too_large"}


def _in_wire_shape(wire, request, response) -> JsonResponse:
    status = response.status_code
    if status == 404:
        message = f"no drop-in endpoint at {request.method} {request.path}"
    elif status == 405:
        allowed = response.get("Allow", "")
        message = f"{request.method} is not allowed on {request.path} (allowed: {allowed})"
    else:
        message = f"the request failed with HTTP {status}"
    kind = _KINDS.get(status, "invalid_request" if status < 500 else "upstream")
    error = DropinError(status, kind, message, code="not_found" if status == 404 else None)
    answer = JsonResponse(wire.error_body(error), status=status)
    if response.get("Allow"):
        answer["Allow"] = response["Allow"]
    return answer
