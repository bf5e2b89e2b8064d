"""Durable turn jobs: `summarize_turn` (the librarian, then TX-B) and `index_turn` (TX-C).

A `TurnJob` row is the durable record; django-q2 only delivers it (`turns.tasks`). A job
is claimed with compare-and-set and a lease (`lease_until`); a worker that dies leaves an
expired lease, and the reconciler (or any worker) takes the job over. Both jobs are
idempotent by construction: a state commit is unique per (branch, state_seq) and guarded
by compare-and-set on the turn's phase and the branch head; indexing is unique per chunk.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from turns.memory_port import turn_memory
from turns.models import (
    FINALIZED_PHASES,
    IndexStatus,
    JobState,
    JobType,
    Phase,
    StateCheckpoint,
    TurnJob,
    UserTurn,
)

logger = logging.getLogger("lcm.turns")

TASK = "turns.tasks.run_turn_job"
MAX_INDEX_ATTEMPTS = 3
MAX_SUMMARIZE_ATTEMPTS = 5


def _dispatch(job_id: str) -> None:
    from django_q.tasks import async_task

    try:
        # Read `sync` at call time (django-q reads Q_CLUSTER once, at import).
        async_task(TASK, job_id, sync=bool(settings.Q_CLUSTER.get("sync", False)))
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
    transaction.on_commit(lambda job_id=job.pk: _dispatch(job_id))
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


def _release(job: TurnJob, state: str, error: str = "") -> None:
    TurnJob.objects.filter(pk=job.pk, state=JobState.RUNNING).update(
        state=state, lease_until=None, last_error=error[:2000], updated_at=timezone.now()
    )


def job_run(job_id: str) -> str | None:
    """Run one job if it can be claimed; returns its final state (None: not claimed)."""
    job = job_claim(job_id)
    if job is None:
        return None
    try:
        if job.job_type == JobType.SUMMARIZE_TURN:
            state = summarize_turn(turn_id=job.turn_id)
            turn = UserTurn.objects.only("phase", "state_after_id").get(pk=job.turn_id)
            if state is None and turn.state_after_id is None and turn.phase in FINALIZED_PHASES:
                # Waiting for an earlier turn's commit: that commit wakes this job again.
                _release(job, JobState.PENDING, "waiting for the previous turn's commit")
                return JobState.PENDING
        elif job.job_type == JobType.INDEX_TURN:
            index_turn(turn_id=job.turn_id)
        elif job.job_type == JobType.RECONCILE:
            from turns.reconcile import reconcile

            reconcile()
    except Exception as error:
        logger.exception("turn job %s (%s) failed", job.pk, job.job_type)
        limit = (
            MAX_SUMMARIZE_ATTEMPTS if job.job_type == JobType.SUMMARIZE_TURN else MAX_INDEX_ATTEMPTS
        )
        final = JobState.FAILED if job.attempts >= limit else JobState.PENDING
        _release(job, final, f"{type(error).__name__}: {error}")
        return final
    _release(job, JobState.DONE)
    return JobState.DONE


def job_dispatch_waiting(*, branch_id: str, after_seq: int) -> None:
    """Re-dispatch the pending summarize job of the turn right after `after_seq`."""
    for job_id in TurnJob.objects.filter(
        branch_id=branch_id,
        job_type=JobType.SUMMARIZE_TURN,
        state=JobState.PENDING,
        turn__turn_seq=after_seq + 1,
    ).values_list("pk", flat=True):
        _dispatch(job_id)


# --- the jobs themselves -------------------------------------------------------------------


def summarize_turn(*, turn_id: str) -> StateCheckpoint | None:
    """The librarian writes the state after `turn`, then TX-B commits it. Returns the new
    state, or None when there is nothing to do (already committed, failed) or the turn
    must wait for an earlier pending turn. Safe to run twice at once: one commit wins."""
    from turns.branches import state_commit
    from turns.librarian import librarian_for_turn

    for _attempt in range(3):  # re-plan when a pin or an earlier commit moved the head
        turn = UserTurn.objects.select_related("branch").get(pk=turn_id)
        if turn.state_after_id is not None or turn.phase not in FINALIZED_PHASES:
            return None
        if UserTurn.objects.filter(
            branch_id=turn.branch_id,
            turn_seq__lt=turn.turn_seq,
            phase__in=FINALIZED_PHASES,
            state_after__isnull=True,
        ).exists():
            return None  # strict branch order: the earlier turn commits first
        head = StateCheckpoint.objects.get(pk=turn.branch.head_state_id)
        started = time.monotonic()
        result = librarian_for_turn(turn=turn, head=head)
        state = state_commit(
            turn=turn, summary=result.summary, librarian=result.info, base_summary=head.summary
        )
        if state is not None:
            _telemetry_add(
                turn.pk,
                summarize_ms=round((time.monotonic() - started) * 1000),
                librarian=result.info,
            )
            return state
    return None


def _telemetry_add(turn_id: str, **values) -> None:
    """Merge values into turn.telemetry (read-modify-write under the row lock)."""
    with transaction.atomic():
        turn = UserTurn.objects.select_for_update().only("telemetry").get(pk=turn_id)
        telemetry = dict(turn.telemetry or {})
        latency = telemetry.setdefault("latency_ms", {})
        for key, value in values.items():
            if key.endswith("_ms"):
                latency[key] = value
            else:
                telemetry[key] = value
        UserTurn.objects.filter(pk=turn_id).update(telemetry=telemetry)


def index_turn(*, turn_id: str) -> str:
    """TX-C: index the committed turn's chunks (memory.indexing) and move it to done.
    A failure marks the index degraded and is retried later; it never blocks the turn."""
    turn = UserTurn.objects.get(pk=turn_id)
    if turn.phase not in (Phase.STATE_COMMITTED, Phase.INDEXED, Phase.DONE):
        return turn.index_status
    started = time.monotonic()
    memory = turn_memory()
    status = IndexStatus.INDEXED
    error = None
    try:
        if memory is not None:
            memory.index_turn(turn_id=turn_id)
    except Exception as exc:  # noqa: BLE001 - any indexing failure degrades, never blocks
        logger.exception("indexing turn %s failed", turn_id)
        status, error = IndexStatus.DEGRADED, f"{type(exc).__name__}: {exc}"
    now = timezone.now()
    UserTurn.objects.filter(pk=turn_id).update(index_status=status, updated_at=now)
    UserTurn.objects.filter(pk=turn_id, phase=Phase.STATE_COMMITTED).update(
        phase=Phase.INDEXED, updated_at=now
    )
    UserTurn.objects.filter(pk=turn_id, phase=Phase.INDEXED).update(
        phase=Phase.DONE, updated_at=now
    )
    _telemetry_add(turn_id, index_ms=round((time.monotonic() - started) * 1000))
    if error:
        raise RuntimeError(error)  # the job records it and is retried (MAX_INDEX_ATTEMPTS)
    return status
