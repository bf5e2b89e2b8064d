"""What the durable turn jobs do: `summarize_turn` (the librarian, then TX-B) and
`index_turn` (TX-C), run by `job_run` for a queued `TurnJob` (rows, claims and leases are
in `turns/job_queue.py`), and "commit pending now", which runs the summarizations inline.

Both jobs are idempotent by construction: a state commit is unique per (branch, state_seq)
and guarded by compare-and-set on the turn's phase and the branch head; indexing is unique
per chunk.
"""

from __future__ import annotations

import logging
import time

from django.db import transaction

from turns import metrics
from turns.branches import state_commit
from turns.job_queue import MAX_INDEX_ATTEMPTS, MAX_SUMMARIZE_ATTEMPTS, job_claim, job_release
from turns.librarian import librarian_for_turn
from turns.memory_port import turn_memory
from turns.models import (
    FINALIZED_PHASES,
    Branch,
    IndexStatus,
    JobState,
    JobType,
    Phase,
    StateCheckpoint,
    UserTurn,
)
from turns.phases import index_recorded
from turns.reconcile import reconcile

logger = logging.getLogger("lcm.turns")


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
                job_release(job, JobState.PENDING, "waiting for the previous turn's commit")
                return JobState.PENDING
        elif job.job_type == JobType.INDEX_TURN:
            index_turn(turn_id=job.turn_id)
        elif job.job_type == JobType.RECONCILE:
            reconcile()
    except Exception as error:
        logger.exception("turn job %s (%s) failed", job.pk, job.job_type)
        limit = (
            MAX_SUMMARIZE_ATTEMPTS if job.job_type == JobType.SUMMARIZE_TURN else MAX_INDEX_ATTEMPTS
        )
        final = JobState.FAILED if job.attempts >= limit else JobState.PENDING
        job_release(job, final, f"{type(error).__name__}: {error}")
        return final
    job_release(job, JobState.DONE)
    return JobState.DONE


# --- the jobs themselves -------------------------------------------------------------------


def summarize_turn(*, turn_id: str) -> StateCheckpoint | None:
    """The librarian writes the state after `turn`, then TX-B commits it. Returns the new
    state, or None when there is nothing to do (already committed, failed) or the turn
    must wait for an earlier pending turn. Safe to run twice at once: one commit wins."""
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
            summarize_ms = round((time.monotonic() - started) * 1000)
            metrics.observe_latency("summarize", summarize_ms)
            _telemetry_add(turn.pk, summarize_ms=summarize_ms, librarian=result.info)
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
    index_recorded(turn_id=turn_id, status=status)
    index_ms = round((time.monotonic() - started) * 1000)
    metrics.observe_latency("index", index_ms)
    _telemetry_add(turn_id, index_ms=index_ms)
    if error:
        raise RuntimeError(error)  # the job records it and is retried (MAX_INDEX_ATTEMPTS)
    return status


def commit_pending(*, branch: Branch) -> list[StateCheckpoint]:
    """ "Commit pending now": run the branch's pending summarizations here, in turn order."""
    states = []
    for turn in UserTurn.objects.filter(
        branch_id=branch.pk, phase__in=FINALIZED_PHASES, state_after__isnull=True
    ).order_by("turn_seq"):
        state = summarize_turn(turn_id=turn.pk)
        if state is not None:
            states.append(state)
    return states
