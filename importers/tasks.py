"""django-q2 entry points."""

from __future__ import annotations

from importers.jobs import import_job_run


def run_import_job(job_id: int) -> dict | None:
    """Run the import job `job_id` (a no-op if another worker already claimed it)."""
    job = import_job_run(job_id=job_id)
    return None if job is None else {"state": job.state}
