"""The drop-in's refusals, each rendered in the calling wire's own error shape."""

from __future__ import annotations


class DropinError(Exception):
    """`kind` is one of: invalid_request, authentication, permission, not_found, too_large,
    upstream."""

    def __init__(
        self,
        status: int,
        kind: str,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        headers: dict | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message
        self.param = param
        self.code = code
        self.headers = dict(headers or {})


def invalid(message: str, param: str | None = None) -> DropinError:
    return DropinError(400, "invalid_request", message, param=param, code="invalid_value")


def broken(response) -> bool:
    """An upstream answer that failed, or whose stream broke before its end: the client's
    stream ends with its wire's error event (what came is stored, marked incomplete)."""
    outcome = response.outcome
    if outcome["status"] == "failed":
        return True
    return outcome["status"] == "incomplete" and outcome.get("reason") in (
        "connection_lost",
        "timeout",
    )


def error_response(wire, error: DropinError):
    """`error` as an HTTP response in `wire`'s error shape."""
    from django.http import JsonResponse

    response = JsonResponse(wire.error_body(error), status=error.status)
    for name, value in error.headers.items():
        response[name] = value
    return response


def upstream_error(error) -> DropinError:
    """A `ProviderError` raised before the first byte, as the client's refusal."""
    status = error.status if error.status and 400 <= error.status < 600 else 502
    return DropinError(
        status,
        "upstream",
        f"upstream {error.provider or 'model'}: {error.message}",
        code=error.code,
    )
