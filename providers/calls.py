"""What every SDK adapter shares: opening a call with retries before the first byte, and
turning SDK exceptions into `ProviderError`s whose messages carry no secret.

Both official SDKs name their exceptions alike (`AuthenticationError`, `APIStatusError`,
`APITimeoutError`, `APIConnectionError`, ...), so one loop serves both. The SDKs' own
retries are off (`max_retries=0` on the client): 429, 529 and other 5xx are retried here,
honouring `retry-after`, with an injectable `sleep`. Timeouts and refused connections are
not retried (the caller decides; compaction escalates, the turn engine fails the step).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from types import ModuleType
from typing import TypeVar

from django.conf import settings

from providers import retry
from providers.errors import ProviderAuthError, ProviderError, ProviderUnavailable
from providers.guard import CallGuard, NoGuard
from providers.redaction import redact_secrets

logger = logging.getLogger("providers")

T = TypeVar("T")


_transports: dict[str, object] = {}
_transports_lock = threading.Lock()


def shared_http_client(sdk: ModuleType):
    """One HTTP connection pool per SDK per process. Building an SDK client costs about
    50 ms (mostly its TLS context), so per-call clients (made per call because the key is
    read from the environment per call) share this pool and are never closed: closing
    one would close the pool. The pool holds connections, never a key."""
    name = sdk.__name__
    with _transports_lock:
        client = _transports.get(name)
        if client is None or getattr(client, "is_closed", False):
            client = _transports[name] = sdk.DefaultHttpxClient()
        return client


def default_timeout() -> float:
    return float(getattr(settings, "LCM_PROVIDER_TIMEOUT_SECONDS", 600.0))


def default_max_retries() -> int:
    return int(getattr(settings, "LCM_PROVIDER_MAX_RETRIES", 2))


def scrub(text: str, secrets: tuple[str, ...] = ()) -> str:
    """`text` with the given secrets and anything shaped like a secret masked."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[REDACTED]")
    return redact_secrets(text)


def error_detail(error: Exception) -> dict:
    """The provider's error object from an SDK status error: Anthropic sends
    {"type": "error", "error": {"type", "message"}}, OpenAI {"error": {"type", "code",
    "message"}} (the SDK may hand over either the whole body or the inner object)."""
    body = getattr(error, "body", None)
    if not isinstance(body, dict):
        return {}
    inner = body.get("error")
    return inner if isinstance(inner, dict) else body


def status_error(
    error, *, provider: str, secrets: tuple[str, ...], prefer: str = "type"
) -> ProviderError:
    detail = error_detail(error)
    other = "code" if prefer == "type" else "type"
    code = str(detail.get(prefer) or detail.get(other) or f"http_{error.status_code}")
    message = scrub(str(detail.get("message") or error.message), secrets)
    retry_after = retry.retry_after_seconds(error.response.headers)
    status = error.status_code
    if status in (401, 403):
        kind: type[ProviderError] = ProviderAuthError
    elif retry.is_retryable(status):
        kind = ProviderUnavailable
    else:
        kind = ProviderError
    return kind(code, message, status=status, retry_after=retry_after, provider=provider)


def call_with_retries(
    connect: Callable[[], T],
    *,
    sdk: ModuleType,
    provider: str,
    max_retries: int,
    timeout: float,
    sleep: Callable[[float], None] = time.sleep,
    secrets: tuple[str, ...] = (),
    prefer: str = "type",
    guard: CallGuard | None = None,
    conversation_id: int | None = None,
    purpose: str = "turn",
) -> T:
    """`connect()` (an SDK call that raises on an HTTP error status) with retries; raises a
    ProviderError subclass when it cannot get an answer."""
    guard = guard or NoGuard()
    guard.check(provider=provider, conversation_id=conversation_id)
    guard.record_call(provider=provider, conversation_id=conversation_id)
    for attempt in range(max(0, max_retries) + 1):
        try:
            result = connect()
        except sdk.APIError as error:
            failure = _provider_error(
                error, sdk=sdk, provider=provider, timeout=timeout, secrets=secrets, prefer=prefer
            )
            if attempt >= max_retries or not _retryable(error, sdk):
                if isinstance(failure, ProviderUnavailable):  # the circuit breaker counts it
                    guard.failure(provider=provider, error=str(failure))
                raise failure from None
            wait = retry.backoff_seconds(attempt, failure.retry_after)
            logger.warning(
                "provider call failed, retrying",
                extra={
                    "provider": provider,
                    "purpose": purpose,
                    "conversation_id": conversation_id,
                    "status": error.status_code,
                    "code": failure.code,
                    "attempt": attempt + 1,
                    "wait_seconds": wait,
                },
            )
            sleep(wait)
        else:
            guard.success(provider=provider)
            return result
    raise AssertionError("unreachable")  # the loop returns or raises


def _retryable(error: Exception, sdk: ModuleType) -> bool:
    """Only an HTTP answer that says "later" (429, 529, other 5xx) is tried again: a
    refused key, a timeout or a refused connection is the caller's to decide."""
    return isinstance(error, sdk.APIStatusError) and retry.is_retryable(error.status_code)


def _provider_error(
    error: Exception,
    *,
    sdk: ModuleType,
    provider: str,
    timeout: float,
    secrets: tuple[str, ...] = (),
    prefer: str = "type",
) -> ProviderError:
    """The `ProviderError` for an SDK exception, its message scrubbed of secrets: 401/403
    are `ProviderAuthError`; timeouts, refused connections and retryable statuses
    `ProviderUnavailable`."""
    if isinstance(error, sdk.APITimeoutError):  # before APIConnectionError, its base class
        return ProviderUnavailable("timeout", f"timed out after {timeout:g} s", provider=provider)
    if isinstance(error, sdk.APIConnectionError):
        return ProviderUnavailable(
            "connection_error", scrub(f"connection failed: {error}", secrets), provider=provider
        )
    if isinstance(error, sdk.APIStatusError):
        return status_error(error, provider=provider, secrets=secrets, prefer=prefer)
    # the SDK's base class: anything else it raises
    return ProviderError(
        "provider_error", scrub(f"{error.__class__.__name__}: {error}", secrets), provider=provider
    )


class WireEvents:
    """`(event_type, payload)` of a server-sent event stream. A network failure while
    reading (dropped connection, read timeout) ends the iteration and is kept in `broken`
    ("timeout" or "connection_lost"); errors in our own handling of an event are not
    caught here, so they are never mistaken for a lost connection."""

    def __init__(self, events: Iterable, provider: str) -> None:
        self.events = events
        self.provider = provider
        self.broken: str | None = None
        self.data: str | None = None  # the newest event's data, exactly as it came

    def __iter__(self) -> Iterator[tuple[str, dict]]:
        iterator = iter(self.events)
        while True:
            try:
                sse = next(iterator)
            except StopIteration:
                return
            except Exception as error:  # httpx / SDK connection and timeout errors
                name = type(error).__name__
                self.broken = "timeout" if "timeout" in name.lower() else "connection_lost"
                logger.warning(
                    "provider stream broke",
                    extra={"provider": self.provider, "reason": self.broken, "error": name},
                )
                return
            if not sse.data or sse.data.startswith("[DONE]"):
                continue
            self.data = sse.data
            payload = _payload(sse.data)
            yield sse.event or str(payload.get("type") or ""), payload


def _payload(data: str) -> dict:
    try:
        value = json.loads(data)
    except json.JSONDecodeError:
        return {"_raw": data}
    return value if isinstance(value, dict) else {"_raw": value}
