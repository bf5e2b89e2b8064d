"""The one place the drop-in calls an upstream model: every model call a drop-in request
makes (the answer, each step of the memory tool loop, a streamed answer) goes through
`complete` or `stream` here, so whatever must see every upstream call (receipts, metrics)
hooks in this module and nowhere else.

No transaction or database connection is open while these run (dropin/pipeline.py)."""

from __future__ import annotations

from collections.abc import Iterator

from providers.base import ProviderRequest, ProviderResponse, StreamEvent
from providers.registry import provider_for


def complete(request: ProviderRequest) -> ProviderResponse:
    """One whole answer; raises `ProviderError`."""
    return provider_for(request.model).complete(request)


def stream(request: ProviderRequest) -> Iterator[StreamEvent]:
    """The upstream's stream events (`RawEvent`s for the journal, ours, then `Finished`);
    raises `ProviderError` when the call cannot open (on the first `next`)."""
    return provider_for(request.model).stream(request)
