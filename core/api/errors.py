"""The one error shape of the API: {"code": "...", "message": "...", "extra": {...}}.

Services raise `LcmError` subclasses; DRF and Django errors are translated here, so
every 4xx and 5xx a client sees has the same three keys.
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.db import OperationalError
from django.http import Http404, JsonResponse
from rest_framework import exceptions as drf
from rest_framework.response import Response

logger = logging.getLogger("lcm.api")


class LcmError(Exception):
    """Base of every domain error; `status` is the HTTP status an adapter should use."""

    status = 400
    code = "invalid"

    def __init__(
        self, message: str, *, code: str | None = None, extra: dict[str, Any] | None = None
    ):
        super().__init__(message)
        self.message = message
        if code:
            self.code = code
        self.extra = extra or {}

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "extra": self.extra}


class InvalidInput(LcmError):
    status = 400
    code = "invalid"


class NotFound(LcmError):
    status = 404
    code = "not_found"


class Conflict(LcmError):
    """Retryable: another writer holds the conversation; try again after `retry_after` seconds."""

    status = 409
    code = "conflict"

    def __init__(
        self,
        message: str,
        *,
        retry_after: float = 1.0,
        code: str | None = None,
        extra: dict[str, Any] | None = None,
    ):
        super().__init__(message, code=code, extra={"retry_after": retry_after, **(extra or {})})
        self.retry_after = retry_after


class PayloadTooLarge(LcmError):
    status = 413
    code = "payload_too_large"


class Unavailable(LcmError):
    status = 503
    code = "unavailable"


def error_body(code: str, message: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"code": code, "message": message, "extra": extra or {}}


_DRF_CODES = {
    drf.ParseError: "malformed_request",
    drf.AuthenticationFailed: "authentication_failed",
    drf.NotAuthenticated: "not_authenticated",
    drf.PermissionDenied: "permission_denied",
    drf.NotFound: "not_found",
    drf.MethodNotAllowed: "method_not_allowed",
    drf.NotAcceptable: "not_acceptable",
    drf.UnsupportedMediaType: "unsupported_media_type",
    drf.Throttled: "throttled",
}


def _validation_message(detail: Any) -> str:
    """The first concrete complaint in a nested DRF ValidationError, with its path."""

    def walk(node: Any, path: str) -> str | None:
        if isinstance(node, dict):
            for key, value in node.items():
                found = walk(value, f"{path}.{key}" if path else str(key))
                if found:
                    return found
        elif isinstance(node, list):
            for index, value in enumerate(node):
                if isinstance(value, dict | list):
                    found = walk(value, f"{path}[{index}]")
                else:
                    found = f"{path}: {value}" if path else str(value)
                if found:
                    return found
        elif node:
            return f"{path}: {node}" if path else str(node)
        return None

    return walk(detail, "") or "invalid input"


# Lock contention the client can simply retry: PostgreSQL lock_not_available,
# deadlock_detected and serialization_failure; SQLite's busy timeout running out.
_RETRYABLE_SQLSTATES = {"55P03", "40P01", "40001"}


def is_lock_contention(exc: BaseException) -> bool:
    if not isinstance(exc, OperationalError):
        return False
    if getattr(exc.__cause__, "sqlstate", None) in _RETRYABLE_SQLSTATES:
        return True
    return "database is locked" in str(exc) or "database table is locked" in str(exc)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if is_lock_contention(exc):
        logger.warning("lock contention answered with 409: %s", exc)
        exc = Conflict("another writer holds this data; retry shortly", code="busy")
    if isinstance(exc, LcmError):
        headers = {}
        if isinstance(exc, Conflict):
            headers["Retry-After"] = str(max(1, round(exc.retry_after)))
        return Response(exc.as_dict(), status=exc.status, headers=headers)
    if isinstance(exc, RequestDataTooBig):
        return Response(error_body("payload_too_large", str(exc)), status=413)
    if isinstance(exc, Http404):
        exc = drf.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = drf.PermissionDenied()
    if isinstance(exc, drf.ValidationError):
        return Response(
            error_body("invalid", _validation_message(exc.detail), {"fields": exc.detail}),
            status=400,
        )
    if isinstance(exc, drf.APIException):
        code = next((c for cls, c in _DRF_CODES.items() if isinstance(exc, cls)), "error")
        detail = exc.detail if isinstance(exc.detail, str) else _validation_message(exc.detail)
        headers = {}
        if getattr(exc, "auth_header", None):
            headers["WWW-Authenticate"] = exc.auth_header
        if getattr(exc, "wait", None):
            headers["Retry-After"] = str(int(exc.wait))
        return Response(error_body(code, str(detail)), status=exc.status_code, headers=headers)
    logger.exception("unhandled API error", exc_info=exc)
    return Response(error_body("server_error", "internal server error"), status=500)


def json_error(
    status: int, code: str, message: str, extra: dict[str, Any] | None = None
) -> JsonResponse:
    """For code outside DRF views (middleware, handler404/500)."""
    return JsonResponse(error_body(code, message, extra), status=status)
