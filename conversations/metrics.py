"""Store-level figures for /metrics, read from the database at scrape time."""

from __future__ import annotations

from django.db.models import Sum

from conversations.models import ContextItem
from core.metrics import Sample


def collect():
    tokens = ContextItem.objects.aggregate(total=Sum("token_count"))["total"] or 0
    yield Sample(
        "lcm_context_tokens_total",
        "gauge",
        "Tokens in the active contexts of all conversations.",
        (({}, float(tokens)),),
    )
