"""django-q2 entry points."""

from __future__ import annotations

from compaction.services import job_run


def run_compaction_job(job_id: int) -> dict | None:
    """Run the compaction job `job_id` (a no-op if another worker already claimed it)."""
    job = job_run(job_id=job_id)
    return None if job is None else {"state": job.state, "result": job.result}
