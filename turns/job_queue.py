"""The durable queue of turn jobs: `TurnJob` rows, their claim and lease, their dispatch.

A `TurnJob` row is the durable record; django-q2 only delivers it (`turns.tasks`). A job
is claimed with compare-and-set and a lease (`lease_until`); a worker that dies leaves an
expired lease, and the reconciler (or any worker) takes the job over. What a job does is in
`turns/jobs.py`; this module knows only rows, so every layer of the engine may enqueue.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from core.job_queues import enqueue
from turns.models import JobState, JobType, TurnJob, UserTurn

logger = logging.getLogger("lcm.turns")

TASK = "turns.tasks.run_turn_job"
MAX_INDEX_ATTEMPTS = 3
MAX_SUMMARIZE_ATTEMPTS = 5


def job_dispatch(job_id: str, *, urgent: bool | None = None) -> None:
    """Hand a pending job to the worker queue, a state commit (`summarize_turn`) to the
    urgent one (core/job_queues.py: the next turn's context waits on it; `urgent` None:
    read from the row). A failure leaves the row pending: the reconciler dispatches it
    again."""
    try:
        if urgent is None:
            urgent = TurnJob.objects.filter(pk=job_id, job_type=JobType.SUMMARIZE_TURN).exists()
        enqueue(TASK, job_id, urgent=urgent)
    except Exception:  # the row stays pending: the reconciler dispatches it again
        logger.exception("could not hand turn job %s to the worker queue", job_id)


def job_enqueue(*, job_type: str, turn: UserTurn) -> TurnJob:
    """A pending job for `turn` (at most one live job per kind and turn), dispatched when
    the surrounding transaction commits."""
    try:
        with transaction.atomic():
            job = TurnJob.objects.create(job_type=job_type, turn=turn, branch_id=turn.branch_id)
    except IntegrityError:
        existing = TurnJob.objects.filter(
            job_type=job_type, turn=turn, state__in=[JobState.PENDING, JobState.RUNNING]
        ).first()
        if existing is not None:
            return existing
        raise
    urgent = job_type == JobType.SUMMARIZE_TURN
    transaction.on_commit(lambda job_id=job.pk: job_dispatch(job_id, urgent=urgent))
    return job


def job_claim(job_id: str) -> TurnJob | None:
    """Claim a pending job, or take over a running one whose lease expired."""
    now = timezone.now()
    lease = now + timedelta(seconds=settings.LCM_TURN_JOB_LEASE_SECONDS)
    claimed = TurnJob.objects.filter(
        Q(state=JobState.PENDING) | Q(state=JobState.RUNNING, lease_until__lt=now), pk=job_id
    ).update(state=JobState.RUNNING, lease_until=lease, attempts=F("attempts") + 1, updated_at=now)
    if claimed != 1:
        return None
    return TurnJob.objects.get(pk=job_id)


def job_release(job: TurnJob, state: str, error: str = "") -> None:
    """Give up the lease of a running job, leaving it in `state` (with its last error)."""
    TurnJob.objects.filter(pk=job.pk, state=JobState.RUNNING).update(
        state=state, lease_until=None, last_error=error[:2000], updated_at=timezone.now()
    )


def job_dispatch_waiting(*, branch_id: str, after_seq: int) -> None:
    """Re-dispatch the pending summarize job of the turn right after `after_seq`."""
    for job_id in TurnJob.objects.filter(
        branch_id=branch_id,
        job_type=JobType.SUMMARIZE_TURN,
        state=JobState.PENDING,
        turn__turn_seq=after_seq + 1,
    ).values_list("pk", flat=True):
        job_dispatch(job_id, urgent=True)
