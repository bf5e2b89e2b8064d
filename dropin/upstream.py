"""The one place the drop-in calls an upstream model: every model call a drop-in request
makes (the answer, each step of the memory tool loop, a streamed answer) goes through
`complete` or `stream` here, so whatever must see every upstream call (receipts, metrics)
hooks in this module and nowhere else.

Receipts (docs/receipts.md): the calls made inside `receipted(...)` leave a receipt naming
the thread's stored items they were built from; the providers layer hands the receipts
app the exact bytes sent. A wire that calls its upstream without the providers layer (a
byte-for-byte pass-through) records with `receipts.recording.record_upstream_call` and the
same `receipt_context(...)`.

No transaction or database connection is open while these run (dropin/pipeline.py)."""

from __future__ import annotations

from collections.abc import Iterator

from dropin.receipt_items import receipt_context
from providers.base import ProviderRequest, ProviderResponse, StreamEvent
from providers.registry import provider_for
from receipts.context import call_context


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
