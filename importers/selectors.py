"""Reads: import jobs, owner-scoped."""

from __future__ import annotations

from core.api.errors import NotFound
from importers.models import ImportJob


def import_job_get_for_user(*, user, job_id: int) -> ImportJob:
    """Only the owner (or staff) sees a job; anyone else gets a 404."""
    jobs = ImportJob.objects.all() if user.is_staff else ImportJob.objects.filter(owner=user)
    job = jobs.filter(pk=job_id).first()
    if job is None:
        raise NotFound(f"import {job_id} not found")
    return job
