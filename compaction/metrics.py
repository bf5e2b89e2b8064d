"""Compaction figures for /metrics, read from the database at scrape time."""

from __future__ import annotations

from django.db.models import Count

from compaction.models import CompactionRun
from conversations.models import Summary
from core.metrics import Sample


def collect():
    runs = (
        CompactionRun.objects.values_list("status", "reason")
        .annotate(n=Count("id"))
        .order_by("status", "reason")
    )
    yield Sample(
        "lcm_compaction_runs_total",
        "counter",
        "Compaction runs, by outcome and trigger reason.",
        tuple(({"status": s, "reason": r}, float(n)) for s, r, n in runs),
    )
    by_kind = dict(Summary.objects.values_list("kind").annotate(n=Count("id")).order_by("kind"))
    yield Sample(
        "lcm_summaries_created_total",
        "counter",
        "Summaries written, by kind.",
        tuple(({"kind": kind}, float(by_kind.get(kind, 0))) for kind in ("leaf", "condensed")),
    )
