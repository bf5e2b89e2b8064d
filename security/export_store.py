"""Where export archives built in the background are kept (the `export_archives` storage:
`LCM_DATA_DIR/exports` or the bucket, encrypted at rest with LCM_ENCRYPTION_KEY), and
their removal: when their time is up (LCM_EXPORT_KEEP_HOURS), and when a redaction or a
hard delete changes what they hold (an archive kept on the server must not outlive the
text it was asked to lose)."""

from __future__ import annotations

from django.core.files.storage import storages
from django.utils import timezone

from security.models import ExportJob, ExportState


def archive_storage():
    return storages["export_archives"]


def _expire(jobs, reason: str) -> int:
    storage = archive_storage()
    expired = 0
    for job in jobs:
        if job.storage_key and storage.exists(job.storage_key):
            storage.delete(job.storage_key)
        ExportJob.objects.filter(pk=job.pk).update(state=ExportState.EXPIRED, error=reason)
        expired += 1
    return expired


def expire_due(now=None) -> int:
    """Delete the archives whose time is up; their jobs become `expired`."""
    due = ExportJob.objects.filter(state=ExportState.DONE, expires_at__lt=now or timezone.now())
    return _expire(list(due), "kept for LCM_EXPORT_KEEP_HOURS, then deleted")


def expire_holding(conversation_ids, reason: str) -> int:
    """Delete the stored archives (finished or being built) that hold any of these
    conversations; a job still building one fails when it tries to store it."""
    wanted = set(conversation_ids)
    jobs = [
        job
        for job in ExportJob.objects.filter(
            state__in=[ExportState.DONE, ExportState.RUNNING, ExportState.PENDING]
        )
        if wanted & set(job.conversation_ids)  # few rows: exports are asked by hand
    ]
    return _expire(jobs, reason)
