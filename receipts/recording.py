"""Recording: what a call site says about its call, and the observer that turns every
upstream call into a receipt.

A call site wraps its provider call in `call_context(site=..., items=[...], ...)`: the
items it put in the request and why, the budget and what was left out. The providers
layer tells the observer when the call goes out and when it comes back (with the exact
body sent); the observer writes the receipt (`receipts.services.receipt_record`). A call
made outside any context still gets a receipt, with no items named (its body is kept as
template and blobs: exact, only larger).

Recording hook for code that calls upstream itself, without the providers layer (a
pass-through relay, the repair addendum): `record_upstream_call(...)` below takes the
exact bytes sent and what came back.
"""

from __future__ import annotations

import logging
import time

from django.conf import settings

from providers.observe import UpstreamCall
from receipts.context import CallContext, current_context
from receipts.services import receipt_record

logger = logging.getLogger("receipts")


def enabled() -> bool:
    return bool(getattr(settings, "LCM_RECEIPTS", True))


class _Observer:
    """Filled into `providers.observe` by this app's `ready()`."""

    def begin(self, call: UpstreamCall) -> None:
        call.state["context"] = current_context()

    def finish(self, call: UpstreamCall, response, error: Exception | None) -> None:
        if not enabled():
            return
        context = call.state.get("context") or CallContext(
            site=_site_of(call.purpose), conversation_id=call.conversation_id
        )
        receipt = receipt_record(
            context=context,
            wire=call.provider,
            model=call.model,
            upstream=call.upstream,
            body=call.body_bytes(),
            response=_response_facts(response, error),
            latency_ms=(time.perf_counter() - call.started) * 1000,
            cache_ttl=call.cache_ttl,
        )
        if receipt is not None:
            context.receipt_ids.append(receipt.pk)


OBSERVER = _Observer()


def _site_of(purpose: str) -> str:
    return purpose if purpose in ("turn", "summary", "librarian", "expansion") else "other"


def _response_facts(response, error: Exception | None) -> dict:
    if response is None:
        if error is None:
            return {"status": "cancelled"}
        return {"status": "failed", "error": getattr(error, "code", type(error).__name__)}
    outcome = response.outcome or {}
    return {
        "status": outcome.get("status") or "completed",
        "stop": outcome.get("reason"),
        "usage": dict(response.usage or {}),
    }


def record_upstream_call(
    *,
    context: CallContext,
    wire: str,
    model: str,
    upstream: str,
    body: bytes,
    response: dict | None = None,
    latency_ms: float | None = None,
    cache_ttl: str = "5m",
):
    """A receipt for a call made without the providers layer. `response` is
    {"status", "stop", "usage": {input_tokens, output_tokens, cache_read_input_tokens,
    cache_creation_input_tokens}} (any may be missing). Returns the receipt or None."""
    if not enabled():
        return None
    receipt = receipt_record(
        context=context,
        wire=wire,
        model=model,
        upstream=upstream,
        body=body,
        response=response or {"status": "completed"},
        latency_ms=latency_ms,
        cache_ttl=cache_ttl,
    )
    if receipt is not None:
        context.receipt_ids.append(receipt.pk)
    return receipt
