"""django-q2 entry points of the job reconciler."""

from __future__ import annotations


def run_reconcile_jobs() -> dict:
    from workers.reconcile import reconcile_jobs

    return reconcile_jobs()
