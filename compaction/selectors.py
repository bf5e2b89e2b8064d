"""Reads of compaction bookkeeping, through the conversation access checkpoint."""

from __future__ import annotations

from compaction.models import CompactionJob
from conversations.selectors import conversations_visible_to
from core.api.errors import NotFound


def job_get_for_user(*, user, job_id: int) -> CompactionJob:
    """The job, if its conversation is visible to `user`; otherwise `NotFound`, the same
    whether the job does not exist or belongs to a conversation the user may not see."""
    job = CompactionJob.objects.filter(
        pk=job_id, conversation__in=conversations_visible_to(user)
    ).first()
    if job is None:
        raise NotFound(f"job {job_id} not found")
    return job
