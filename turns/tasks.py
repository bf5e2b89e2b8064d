"""django-q2 entry points of the turn engine."""

from __future__ import annotations

from turns.jobs import job_run
from turns.reconcile import reconcile


def run_turn_job(job_id: str) -> str | None:
    """Run the turn job `job_id` (a no-op if another worker holds it)."""
    return job_run(job_id)


def run_reconcile() -> dict:
    """The scheduled reconciler (every LCM_RECONCILE_INTERVAL_SECONDS)."""
    return reconcile()
