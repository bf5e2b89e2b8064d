"""Compaction figures for /metrics, read from the database at scrape time."""

from __future__ import annotations

from django.db.models import Avg, Count

from compaction.models import CompactionRun, SummaryFidelity
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
    fidelity = (
        SummaryFidelity.objects.filter(score__isnull=False)
        .values_list("path")
        .annotate(mean=Avg("score"), n=Count("summary_id"))
        .order_by("path")
    )
    rows = [(path, mean, n) for path, mean, n in fidelity]
    yield Sample(
        "lcm_summary_fidelity_mean",
        "gauge",
        "Mean fidelity (share of the sources' handles a summary names), by how it was made.",
        tuple(({"path": path}, round(mean, 4)) for path, mean, _ in rows),
    )
    yield Sample(
        "lcm_summary_fidelity_measured_total",
        "counter",
        "Summaries whose fidelity was measured, by how they were made.",
        tuple(({"path": path}, float(n)) for path, _, n in rows),
    )
