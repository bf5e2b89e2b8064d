"""Watching every model call at the place it goes upstream: the exact request body (the
bytes the SDK's HTTP client sent, read by an httpx request hook) and what came back.

The providers layer knows nothing of conversations or receipts; the receipts app, above
it, registers one observer in its `ready()` (docs/receipts.md). With nothing registered a
call costs one context-variable read and no hook does anything.

An observer gets `begin(call)` before the call and `finish(call, response, error)` after
it (the response when one came back, else the `ProviderError`); an observer that raises is
logged and never fails the call.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

logger = logging.getLogger("providers")


@dataclass
class UpstreamCall:
    """One model call as it went upstream."""

    provider: str  # "anthropic" | "openai" | "openai_chat" | "offline" | a drop-in wire
    model: str  # the model id sent
    purpose: str  # "turn" | "summary" | "expansion" | "librarian" | ...
    conversation_id: int | None
    upstream: str  # the base URL called ("offline" for the offline provider)
    params: dict  # the body as a dict (what the adapter built)
    cache_ttl: str = "5m"
    body: bytes | None = None  # the exact bytes sent (the last attempt's)
    started: float = field(default_factory=time.perf_counter)
    state: dict = field(default_factory=dict)  # the observer's own notes

    def body_bytes(self) -> bytes:
        """The bytes sent; a call that sent none over HTTP (offline) is its params as
        compact JSON, which is then what "went upstream"."""
        if self.body is not None:
            return self.body
        return json.dumps(self.params, ensure_ascii=False, separators=(",", ":")).encode()


class CallObserver(Protocol):
    def begin(self, call: UpstreamCall) -> None: ...

    def finish(self, call: UpstreamCall, response: Any, error: Exception | None) -> None: ...


_observers: list[CallObserver] = []
# The call being made in this thread or task: the HTTP hook files the body sent under it.
_current: contextvars.ContextVar[UpstreamCall | None] = contextvars.ContextVar(
    "lcm_upstream_call", default=None
)


def register_call_observer(observer: CallObserver) -> None:
    if observer not in _observers:
        _observers.append(observer)


def observing() -> bool:
    return bool(_observers)


def call_begin(call: UpstreamCall) -> bool:
    """Start watching `call`; False when nobody watches (then `call_finish` does nothing)."""
    if not _observers:
        return False
    for observer in _observers:
        try:
            observer.begin(call)
        except Exception:  # a receipt must never fail the call it records
            logger.exception("call observer failed at begin")
    return True


@contextlib.contextmanager
def sending(call: UpstreamCall | None):
    """While the request is sent: the HTTP hook files its body under `call`."""
    if call is None:
        yield
        return
    token = _current.set(call)
    try:
        yield
    finally:
        _current.reset(token)


def call_finish(call: UpstreamCall, watched: bool, response: Any, error: Exception | None) -> None:
    if not watched:
        return
    for observer in _observers:
        try:
            observer.finish(call, response, error)
        except Exception:
            logger.exception("call observer failed at finish")


def http_request_hook(request) -> None:
    """An httpx request hook: files the body of a request sent during a watched call."""
    call = _current.get()
    if call is not None:
        call.body = bytes(request.content)


def hook_client(client: Any) -> None:
    """Make sure the SDK client's httpx client runs `http_request_hook` (idempotent)."""
    if not _observers:
        return
    http = getattr(client, "_client", client)
    hooks = getattr(http, "event_hooks", None)
    if hooks is None:
        return
    requests = hooks.get("request", [])
    if http_request_hook not in requests:
        http.event_hooks = {**hooks, "request": [*requests, http_request_hook]}
