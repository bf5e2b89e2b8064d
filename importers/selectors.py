"""Reads: import jobs and imported agent sessions, owner-scoped."""

from __future__ import annotations

from core.api.errors import NotFound
from importers.models import ImportedConversation, ImportJob


def import_job_get_for_user(*, user, job_id: int) -> ImportJob:
    """Only the owner (or staff) sees a job; anyone else gets a 404."""
    jobs = ImportJob.objects.all() if user.is_staff else ImportJob.objects.filter(owner=user)
    job = jobs.filter(pk=job_id).first()
    if job is None:
        raise NotFound(f"import {job_id} not found")
    return job


def agent_sessions_for_user(
    *, user, agent: str = "", cwd: str = "", git_branch: str = "", model: str = ""
):
    """The owner's imported agent sessions, filtered on what the agent said about them."""
    rows = ImportedConversation.objects.filter(
        conversation__owner=user, conversation__origin__isnull=False
    ).exclude(conversation__origin__agent="")
    for name, value in (("agent", agent), ("cwd", cwd), ("git_branch", git_branch)):
        if value:
            rows = rows.filter(**{f"conversation__origin__{name}": value})
    if model:
        rows = rows.filter(conversation__origin__model__icontains=model)
    return rows.select_related("conversation__origin").order_by("-conversation_id")
