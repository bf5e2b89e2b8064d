"""django-q2 entry points. Schedule with `manage.py lcm_integrity_schedule`.

A scheduled scan is an `IntegrityJob` row with a lease (core/leases.py): the worker
running it renews the lease; if the worker dies, the job reconciler re-dispatches
`run_integrity_job` within LCM_JOB_LEASE_SECONDS + LCM_JOB_RECONCILE_SECONDS, and the
claim (compare-and-set on state and lease) lets exactly one worker take it over. A scan
only reads and writes its own report, so a re-run after a crash is harmless.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db.models import F, Q
from django.utils import timezone

from core.job_queues import enqueue
from core.leases import lease_deadline, lease_kept
from integrity.models import IntegrityJob, IntegrityJobState, ScanMode, Trigger
from integrity.services import integrity_scan

logger = logging.getLogger("lcm.integrity")

RUN_TASK = "integrity.tasks.run_integrity_job"


def integrity_job(conversation_id: int | None = None, mode: str = ScanMode.SCAN) -> dict:
    """The Integrity Worker job: {conversationId?, mode: scan | scan_and_plan}."""
    if mode not in ScanMode.values:
        raise ValueError(f"mode must be one of {', '.join(ScanMode.values)}")
    job = IntegrityJob.objects.create(
        conversation_id=conversation_id, mode=mode, lease_until=lease_deadline()
    )
    return run_integrity_job(job.pk, claimed=True)


def _claim(job_id: int) -> bool:
    """Take the job: created by this worker, or running under an expired lease (its worker
    died). Compare-and-set, so two workers dispatched the same job cannot both run it."""
    now = timezone.now()
    return bool(
        IntegrityJob.objects.filter(pk=job_id, state=IntegrityJobState.RUNNING)
        .filter(Q(lease_until__isnull=True) | Q(lease_until__lt=now))
        .update(lease_until=lease_deadline(now), attempts=F("attempts") + 1)
    )


def run_integrity_job(job_id: int, claimed: bool = False) -> dict:
    if claimed:
        IntegrityJob.objects.filter(pk=job_id).update(attempts=F("attempts") + 1)
    elif not _claim(job_id):
        return {"job_id": job_id, "skipped": "not claimable (finished, or its lease is live)"}
    job = IntegrityJob.objects.get(pk=job_id)
    live = IntegrityJob.objects.filter(pk=job_id, state=IntegrityJobState.RUNNING)
    try:
        with lease_kept(live):
            report = integrity_scan(
                conversation_id=job.conversation_id, mode=job.mode, trigger=Trigger.JOB
            )
    except Exception as exc:
        live.update(
            state=IntegrityJobState.FAILED,
            error=f"{type(exc).__name__}: {exc}"[:2000],
            finished_at=timezone.now(),
        )
        raise
    live.update(state=IntegrityJobState.SUCCEEDED, report=report, finished_at=timezone.now())
    return {"job_id": job_id, "report_id": report.pk, "total_problems": report.total_problems}


def reconcile_integrity_jobs(now) -> tuple[int, int]:
    """(failed, re-dispatched): integrity jobs whose lease expired, i.e. whose worker died.
    After LCM_JOB_MAX_ATTEMPTS claims a job is failed rather than retried for ever."""
    expired = IntegrityJob.objects.filter(state=IntegrityJobState.RUNNING, lease_until__lt=now)
    failed = expired.filter(attempts__gte=settings.LCM_JOB_MAX_ATTEMPTS).update(
        state=IntegrityJobState.FAILED,
        error="abandoned: its worker stopped on every attempt",
        finished_at=now,
    )
    redispatched = 0
    for job_id in list(expired.values_list("pk", flat=True)[:100]):
        enqueue(RUN_TASK, job_id)  # the main queue, from whichever cluster reconciles
        redispatched += 1
    if failed or redispatched:
        logger.info("integrity jobs: %d failed, %d re-dispatched", failed, redispatched)
    return failed, redispatched
