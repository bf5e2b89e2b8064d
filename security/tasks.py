"""django-q2 entry points of the security app's background jobs."""

from __future__ import annotations


def run_redaction(redaction_id: str) -> str | None:
    from security.redaction.queue import run_queued

    row = run_queued(redaction_id)
    return row.state if row is not None else None


def run_export(job_id: str) -> str | None:
    from security.export_jobs import run_export as build

    job = build(job_id)
    return job.state if job is not None else None


def run_reconcile() -> dict:
    from security.reconcile import reconcile_security_jobs

    return reconcile_security_jobs()
