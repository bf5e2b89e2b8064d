"""Export archives built in the background (docs/security.md, "Export archives").

`POST /api/v1/exports/` checks the target (owner or staff, a branch conversation is
exported with its session) and answers 202 with the job's URL; the worker plans the
archive, audits the export, writes the zip to a temporary file under LCM_DATA_DIR (its
progress: rows, files and journals written, every second or so), then stores it in the
`export_archives` storage (encrypted at rest with LCM_ENCRYPTION_KEY) for
LCM_EXPORT_KEEP_HOURS. `GET /api/v1/exports/{id}/archive/` downloads it.

The same request is the same job: while one for the same user and target is queued or
running, or was done in the last ten minutes (a client retrying after a lost answer) and
is still kept, asking again answers it; a failed one is queued again. Later, asking again
is a new export (content may have come in since).
"""

from __future__ import annotations

import hashlib
import logging
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.core.files import File
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core.leases import lease_deadline, lease_kept
from security import background
from security.export_store import archive_storage
from security.exports import Target, export_target, session_target
from security.models import ExportJob, ExportState

logger = logging.getLogger("lcm.security")
TASK = "security.tasks.run_export"
SAME_JOB_FOR = timedelta(minutes=10)
_PROGRESS_EVERY_SECONDS = 1.0


def export_submit(*, target: Target, actor, via: str) -> tuple[ExportJob, bool]:
    """The job for this export, queued after the commit: (job, created)."""
    actor_id = actor.pk if getattr(actor, "is_authenticated", False) else None
    recent = timezone.now() - SAME_JOB_FOR
    with transaction.atomic():
        existing = (
            ExportJob.objects.filter(
                actor_id=actor_id, target_kind=target.kind, target_id=target.id
            )
            .filter(
                Q(state__in=[ExportState.PENDING, ExportState.RUNNING, ExportState.FAILED])
                | Q(state=ExportState.DONE, finished_at__gte=recent)
            )
            .order_by("-created_at")
            .first()
        )
        if existing is not None:
            if existing.state == ExportState.FAILED:  # a retry builds it again
                ExportJob.objects.filter(pk=existing.pk).update(state=ExportState.PENDING, error="")
                existing.state, existing.error = ExportState.PENDING, ""
                transaction.on_commit(lambda: enqueue(existing.pk))
            return existing, False
        job = ExportJob.objects.create(
            id=f"exp_{uuid.uuid4().hex[:16]}",
            actor_id=actor_id,
            actor_name=actor.get_username() if actor_id else "",
            via=via,
            target_kind=target.kind,
            target_id=target.id,
            conversation_ids=sorted(target.conversation_ids),
        )
        transaction.on_commit(lambda: enqueue(job.pk))
    return job, True


def enqueue(job_id: str) -> None:
    background.enqueue(TASK, job_id)


def _target(job: ExportJob) -> Target:
    from turns.models import Session

    if job.target_kind == "session":
        return session_target(Session.objects.get(pk=job.target_id))
    return Target("conversation", job.target_id, frozenset(job.conversation_ids), frozenset())


def _write(job: ExportJob, export, handle) -> dict:
    """The archive's bytes into `handle`; its size and SHA-256."""
    digest, size, last = hashlib.sha256(), 0, time.monotonic()
    rows = export.plan.counts()["rows"]
    total = sum(rows.values()) + len(export.plan.file_ids) + len(export.plan.stream_paths)
    ExportJob.objects.filter(pk=job.pk).update(progress_total=total)
    for chunk in export.chunks():
        handle.write(chunk)
        digest.update(chunk)
        size += len(chunk)
        if time.monotonic() - last >= _PROGRESS_EVERY_SECONDS:
            last = time.monotonic()
            ExportJob.objects.filter(pk=job.pk).update(progress_done=_written(export.manifest))
    return {"size": size, "sha256": digest.hexdigest(), "progress_done": total}


def _written(manifest: dict) -> int:
    tables = sum(t["rows"] for t in manifest.get("tables", {}).values())
    return tables + len(manifest.get("files", [])) + len(manifest.get("streams", []))


def _build(job: ExportJob) -> None:
    from django.contrib.auth import get_user_model

    actor = get_user_model().objects.filter(pk=job.actor_id).first()
    export = export_target(_target(job), actor=actor, via=job.via)
    folder = Path(settings.DATA_DIR) / "exports-building"
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=folder, suffix=".zip") as handle:
        written = _write(job, export, handle)
        handle.flush()
        handle.seek(0)
        key = archive_storage().save(f"{job.pk}.zip", File(handle))
    manifest = {k: v for k, v in export.manifest.items() if k in ("tables", "files", "streams")}
    now = timezone.now()
    stored = ExportJob.objects.filter(pk=job.pk, state=ExportState.RUNNING).update(
        state=ExportState.DONE,
        storage_key=key,
        manifest=manifest,
        finished_at=now,
        expires_at=now + timedelta(hours=settings.LCM_EXPORT_KEEP_HOURS),
        **written,
    )
    if not stored:  # a redaction or hard delete expired it meanwhile: keep nothing
        archive_storage().delete(key)


def run_export(job_id: str) -> ExportJob | None:
    """The worker's side: claim the queued job (compare-and-set) and build its archive
    under a lease. None if another worker has it."""
    claimed = ExportJob.objects.filter(pk=job_id, state=ExportState.PENDING).update(
        state=ExportState.RUNNING, started_at=timezone.now(), lease_until=lease_deadline()
    )
    if not claimed:
        return None
    job = ExportJob.objects.get(pk=job_id)
    with lease_kept(ExportJob.objects.filter(pk=job.pk, state=ExportState.RUNNING)):
        try:
            _build(job)
        except Exception as error:  # recorded on the job: the client polls for it
            logger.exception("export %s failed", job_id)
            ExportJob.objects.filter(pk=job.pk, state=ExportState.RUNNING).update(
                state=ExportState.FAILED,
                error=f"{type(error).__name__}",
                finished_at=timezone.now(),
            )
    job.refresh_from_db()
    return job


def report(job: ExportJob) -> dict:
    done = job.state == ExportState.DONE
    return {
        "id": job.pk,
        "url": f"/api/v1/exports/{job.pk}/",
        "state": job.state,
        "target": {"kind": job.target_kind, "id": job.target_id},
        "progress": {"done": job.progress_done, "total": job.progress_total},
        "created_at": job.created_at,
        "finished_at": job.finished_at,
        "expires_at": job.expires_at,
        "size": job.size,
        "sha256": job.sha256 or None,
        "manifest": job.manifest,
        "download": f"/api/v1/exports/{job.pk}/archive/" if done else None,
        "error": job.error,
    }
