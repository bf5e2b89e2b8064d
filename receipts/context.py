"""What a call site says about its model call: the items it sent and why, the budget, what
was left out. Set around the provider call with `call_context(...)`; the recorder reads it
when the call goes out (receipts/recording.py)."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable
from dataclasses import dataclass, field

from receipts.items import ItemRef


@dataclass
class CallContext:
    site: str  # receipts.models.CallSite
    conversation_id: int | None = None
    # The items, or a function giving them (called when the call is recorded, so a call
    # site that must query to name them does so only when a receipt is written).
    items: list[ItemRef] | Callable[[], list[ItemRef]] = field(default_factory=list)
    source: str = ""  # "step:<id>", "thread:<id>", "job:<id>", ...
    budget: dict = field(default_factory=dict)  # {"tokens": n, ...}
    left_out: list[ItemRef] = field(default_factory=list)  # did not fit the budget
    query: str = ""  # retrieval's query, when items were retrieved
    notes: dict = field(default_factory=dict)  # small facts for people (strategy, ...)
    receipt_ids: list[str] = field(default_factory=list)  # filled: the receipts written


_context: contextvars.ContextVar[CallContext | None] = contextvars.ContextVar(
    "lcm_receipt_context", default=None
)


@contextlib.contextmanager
def call_context(**fields):
    """The context of the model calls made inside the block; yields the `CallContext`
    (its `receipt_ids` list the receipts written, in order)."""
    context = CallContext(**fields)
    token = _context.set(context)
    try:
        yield context
    finally:
        _context.reset(token)


def current_context() -> CallContext | None:
    return _context.get()
