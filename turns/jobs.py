"""What the durable turn jobs do: `summarize_turn` (the librarian, then TX-B, in
turns/committing.py) and `index_turn` (TX-C), run by `job_run` for a queued `TurnJob` (rows,
claims and leases are in `turns/job_queue.py`), and "commit pending now", which runs the
summarizations inline (turns/committing.py; both re-exported here).

Both jobs are idempotent by construction: a state commit is unique per (branch, state_seq)
and guarded by compare-and-set on the turn's phase and the branch head; indexing is unique
per chunk.
"""

from __future__ import annotations

import logging
import time

from turns import metrics
from turns.committing import commit_pending, summarize_turn, telemetry_add
from turns.job_queue import MAX_INDEX_ATTEMPTS, MAX_SUMMARIZE_ATTEMPTS, job_claim, job_release
from turns.memory_port import turn_memory
from turns.models import (
    FINALIZED_PHASES,
    IndexStatus,
    JobState,
    JobType,
    Phase,
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
    telemetry_add(turn_id, index_ms=index_ms)
    if error:
        raise RuntimeError(error)  # the job records it and is retried (MAX_INDEX_ATTEMPTS)
    return status


__all__ = ["commit_pending", "index_turn", "job_run", "summarize_turn"]
