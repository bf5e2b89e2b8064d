"""Retrieval figures: latencies recorded as they happen, and figures read from the
database at scrape time."""

from __future__ import annotations

import time

from django.utils import timezone

from core.metrics import Sample, observe_ms
from retrieval.models import DelegationGrant


def observe_expand_since(started: float, *, kind: str) -> None:
    """Record one expand or sub-agent expansion that began at `started` (perf_counter)."""
    observe_ms(
        "lcm_expand_latency_ms",
        (time.perf_counter() - started) * 1000,
        help="Latency of expand and of sub-agent expansions.",
        kind=kind,
    )


def collect():
    live = DelegationGrant.objects.filter(revoked_at__isnull=True, expires_at__gt=timezone.now())
    yield Sample(
        "lcm_delegation_grants_active",
        "gauge",
        "Delegation grants neither revoked nor expired (running sub-agent expansions).",
        (({}, float(live.count())),),
    )
