"""The one place the drop-in calls an upstream model: every model call a drop-in request
makes (the answer, each step of the memory tool loop, a streamed answer) goes through
`complete`, `stream` or (same-wire pass-through) `forward` here, so whatever must see
every upstream call (receipts, metrics) hooks in this module and nowhere else.

Receipts (docs/receipts.md): the calls made inside `receipted(...)` leave a receipt naming
the thread's stored items they were built from; the providers layer hands the receipts
app the exact bytes sent. A wire that calls its upstream without the providers layer (a
byte-for-byte pass-through, `forward`) records with `forwarded_receipt` below.

No transaction or database connection is open while these run (dropin/pipeline.py)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx2 as httpx  # the SDKs depend on it (the httpx API, renamed)

from dropin.receipt_items import receipt_context
from providers.base import ProviderRequest, ProviderResponse, StreamEvent
from providers.calls import default_timeout
from providers.errors import ProviderError
from providers.registry import provider_for
from receipts.context import CallContext, call_context
from receipts.recording import record_upstream_call

logger = logging.getLogger("lcm.dropin")


def receipted(*, thread, sent, wire: str):
    """The receipt context of the upstream calls of one drop-in request (a `with` block
    around them; a stream's first `next` must run inside it)."""
    return call_context(**receipt_context(thread=thread, upstream=sent, wire=wire))


def complete(request: ProviderRequest) -> ProviderResponse:
    """One whole answer; raises `ProviderError`."""
    return provider_for(request.model).complete(request)


def stream(request: ProviderRequest) -> Iterator[StreamEvent]:
    """The upstream's stream events (`RawEvent`s for the journal, ours, then `Finished`);
    raises `ProviderError` when the call cannot open (on the first `next`)."""
    return provider_for(request.model).stream(request)


# Same-wire pass-through -------------------------------------------------------------------


@dataclass(frozen=True)
class Forward:
    """A request forwarded on the client's own wire: the body as it will be sent (the
    client's bytes, or with the deliberately replaced parts), the headers in the client's
    order (credentials per docs/drop-in.md), the upstream URL with the client's query."""

    url: str
    headers: list[tuple[str, str]]
    body: bytes


_http_lock = threading.Lock()
_http: httpx.Client | None = None


def _client() -> httpx.Client:
    """One connection pool per process (never closed; holds no credential)."""
    global _http
    with _http_lock:
        if _http is None or _http.is_closed:
            _http = httpx.Client(
                timeout=httpx.Timeout(default_timeout(), connect=10.0), follow_redirects=False
            )
        return _http


def forward(call: Forward) -> httpx.Response:
    """Send `call`; the response is open (stream its bytes, then close it). Raises
    `ProviderError` (502/504) when the upstream cannot be reached; an upstream's own error
    status is a response like any other (the client gets it as it came)."""
    client = _client()
    request = client.build_request("POST", call.url, headers=call.headers, content=call.body)
    try:
        return client.send(request, stream=True)
    except httpx.TimeoutException:
        raise ProviderError(
            "timeout", "the upstream did not answer in time", status=504, provider="upstream"
        ) from None
    except httpx.HTTPError as error:
        raise ProviderError(
            "connection_error",
            f"the upstream could not be reached ({type(error).__name__})",
            status=502,
            provider="upstream",
        ) from None


def forwarded_receipt(
    *, thread, wire: str, call: Forward, model: str, facts: dict, started: float, compacted: bool
) -> None:
    """The receipt of a pass-through call: the exact bytes `call` sent (kept as the
    receipt's template, so the replay is exact without naming items) and what came back
    (`facts`: status, stop, usage). A receipt that cannot be written never fails the call."""
    context = CallContext(
        site="dropin",
        conversation_id=thread.conversation_id,
        source=f"thread:{thread.pk}",
        notes={"wire": wire, "forwarded": True, "compacted": compacted},
    )
    try:
        record_upstream_call(
            context=context,
            wire=wire,
            model=model,
            upstream=call.url.split("?", 1)[0],
            body=call.body,
            response=facts,
            latency_ms=(time.perf_counter() - started) * 1000,
        )
    except Exception:
        logger.exception("the receipt of a passed-through call could not be written")
