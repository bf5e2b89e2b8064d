"""Background imports (the API's uploads): create a job, run it with progress.

The upload is saved under LCM_DATA_DIR/imports/ before the job is queued; the job claims
itself with a compare-and-set (pending -> running), so two workers never run it twice,
records its progress every second or so, stores the report, and removes the upload.
"""

from __future__ import annotations

import logging
import shutil
import time
import uuid
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.api.errors import InvalidInput, LcmError
from importers.models import Format, ImportJob, JobState
from importers.services import import_file

logger = logging.getLogger("lcm.importers")
TASK = "importers.tasks.run_import_job"
_PROGRESS_EVERY_SECONDS = 1.0
IMPORT_TIMEOUT = 6 * 3600  # seconds a worker may spend on one import


def upload_dir() -> Path:
    return Path(settings.DATA_DIR) / "imports"


def import_job_create(
    *, owner, format: str, upload, session_id: str = "", dry_run: bool = False
) -> ImportJob:
    """Save the upload and queue its import (after the job row commits)."""
    if format not in Format.values:
        raise InvalidInput(
            f"format {format!r} is not one of: {', '.join(Format.values)}",
            extra={"field": "format"},
        )
    if len(session_id) > 255:
        raise InvalidInput(
            "session_id must be at most 255 characters", extra={"field": "session_id"}
        )
    folder = upload_dir() / uuid.uuid4().hex
    folder.mkdir(parents=True)
    # Never a path from the client: the name only keeps its (sanitised) suffix.
    suffix = "".join(c for c in Path(upload.name or "").suffix[:16] if c.isalnum() or c == ".")
    target = folder / f"upload{suffix}"
    with target.open("wb") as handle:
        for chunk in upload.chunks():
            handle.write(chunk)
    with transaction.atomic():
        job = ImportJob.objects.create(
            owner=owner,
            format=format,
            file_name=(upload.name or "")[:1000],
            upload_path=str(target),
            session_id=session_id,
            dry_run=dry_run,
        )
        transaction.on_commit(lambda: _enqueue(job.pk))
    return job


def _enqueue(job_id: int) -> None:
    from django_q.tasks import async_task

    sync = bool(settings.Q_CLUSTER.get("sync", False))
    # Named: queued from inside the urgent cluster it would otherwise run there
    # (core/job_queues.py).
    queue = {} if sync else {"cluster": settings.LCM_QUEUE_NAME}
    # An import may outlast the cluster-wide timeout (sized for compaction passes).
    async_task(TASK, job_id, sync=sync, timeout=IMPORT_TIMEOUT, **queue)


def import_job_run(*, job_id: int) -> ImportJob | None:
    """Run a pending job; None if another worker claimed it first."""
    claimed = ImportJob.objects.filter(pk=job_id, state=JobState.PENDING).update(
        state=JobState.RUNNING, started_at=timezone.now()
    )
    if not claimed:
        return None
    job = ImportJob.objects.get(pk=job_id)
    last = [0.0]

    def set_total(total: int) -> None:
        ImportJob.objects.filter(pk=job_id).update(progress_total=total)

    def advance(n: int) -> None:
        job.progress_done += n
        now = time.monotonic()
        if now - last[0] >= _PROGRESS_EVERY_SECONDS:
            last[0] = now
            ImportJob.objects.filter(pk=job_id).update(progress_done=job.progress_done)

    try:
        report = import_file(
            format=job.format,
            path=job.upload_path,
            owner=job.owner,
            session_id=job.session_id or None,
            dry_run=job.dry_run,
            trust_paths=False,  # the uploader wrote its paths: read no server file
            advance=advance,
            set_total=set_total,
        )
    except LcmError as error:
        _finish(job, state=JobState.FAILED, error=error.message)
    except Exception as error:  # recorded on the job: the client polls for it
        logger.exception("import job %s failed", job_id)
        _finish(job, state=JobState.FAILED, error=f"{type(error).__name__}: {error}")
    else:
        _finish(job, state=JobState.SUCCEEDED, result=report.as_dict(), errors=report.errors)
    job.refresh_from_db()
    return job


def _finish(job: ImportJob, *, state: str, error: str = "", result=None, errors=None) -> None:
    ImportJob.objects.filter(pk=job.pk).update(
        state=state,
        error=error,
        result=result,
        errors=errors or [],
        progress_done=job.progress_done,
        finished_at=timezone.now(),
    )
    shutil.rmtree(Path(job.upload_path).parent, ignore_errors=True)
