"""lcm_integrity_failures_total: problems found by scans, per check, read at scrape time."""

from __future__ import annotations

from django.db.models import Sum

from core.metrics import Sample
from integrity.models import CheckResult


def collect():
    totals = dict(
        CheckResult.objects.values_list("name")
        .annotate(total=Sum("count"))
        .values_list("name", "total")
    )
    from integrity.checks import CHECKS

    yield Sample(
        "lcm_integrity_failures_total",
        "counter",
        "Problems found by integrity scans, summed over every stored scan, per check.",
        tuple(({"check": check.name}, float(totals.get(check.name, 0))) for check in CHECKS),
    )
