"""The reconciler (SRD 6.4, 6.5): brings every unfinished turn to a clean end after a crash.

`reconcile()` is idempotent and safe to run in several processes at once (every write is
compare-and-set or guarded by a unique constraint); it:
1. finalizes steps that have a journal but were never finalized (the writer is gone):
   outcome incomplete (partial output, no error) or failed; the turn becomes failed with
   the partial output kept, labelled incomplete; the head never advances from it;
2. fails turns stuck before their answer (accepted / context_prepared / responding with
   no open step) whose process is gone;
3. re-mirrors turns into the branch's LCM conversation when the mirror did not run;
4. queues summarize_turn for the first pending turn of every branch (the next ones follow
   in branch order as each commits);
5. queues index_turn for committed turns that are not indexed (and retries degraded ones);
6. re-dispatches jobs whose lease expired (their worker died) or that were never picked up.

It runs when a worker process starts (django-q2 `post_spawn`), every
LCM_RECONCILE_INTERVAL_SECONDS in each worker (a timer thread), from a django-q Schedule
(every minute, a fallback created on migrate), and when the server starts (the lead's
`lcm_serve`).
"""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db.models import Count, Min, Q
from django.utils import timezone

from core import periodic
from turns import journal_store
from turns.job_queue import MAX_INDEX_ATTEMPTS, job_dispatch, job_enqueue
from turns.journal import journal_path, recover_step
from turns.mirror import mirror_turn
from turns.models import (
    FINALIZED_PHASES,
    OPEN_PHASES,
    IndexStatus,
    JobState,
    JobType,
    Phase,
    ProviderStep,
    TurnJob,
    UserTurn,
)
from turns.phases import turn_fail
from turns.runner import running_turns

logger = logging.getLogger("lcm.turns")

# A turn that has not moved for this long before its first provider step has lost its
# process (context assembly takes seconds).
STALE_OPEN_SECONDS = 60
# A step this young may not have opened its journal yet: leave it alone.
YOUNG_STEP_SECONDS = 15
# With a shared storage (several hosts), a step with no journal here is streaming on
# another host, whose reconciler recovers it if its writer dies (the live tail is on that
# host's disk). Only a host that never came back leaves it: failed after this long.
FOREIGN_STEP_SECONDS = 3600
# A pending job nobody picked up for this long is handed to the queue again.
UNPICKED_JOB_SECONDS = 10


def _recover_open_steps(counts: dict, now) -> None:
    steps = ProviderStep.objects.filter(
        ended_at__isnull=True, turn__phase__in=OPEN_PHASES
    ).select_related("turn")
    for step in steps:
        recovered = recover_step(step)
        if recovered.writer_alive:
            continue
        if recovered.entries == 0:
            wait = YOUNG_STEP_SECONDS
            if journal_store.shared_storage() is not None:
                wait = FOREIGN_STEP_SECONDS
            if step.started_at > now - timedelta(seconds=wait):
                continue
        status = "failed" if recovered.error or not recovered.blocks else "incomplete"
        error = recovered.error or {}
        code = str(error.get("code") or error.get("type") or "stream_interrupted")
        message = str(
            error.get("message")
            or "the stream stopped before it finished (the process ended); partial output kept"
        )
        ProviderStep.objects.filter(pk=step.pk, ended_at__isnull=True).update(
            outcome={
                "status": status,
                "reason": "recovered_from_journal",
                "code": code,
                "message": message,
            },
            normalized_items=[{"kind": "assistant_message", "blocks": recovered.blocks}]
            if recovered.blocks
            else [],
            stream_displayed_bytes=recovered.displayed_bytes,
            ended_at=now,
        )
        turn_fail(
            turn=step.turn,
            code=code,
            message=message,
            partial_blocks=recovered.blocks or None,
        )
        # Its writer is gone: the journal is final, so it goes to the shared storage.
        journal_store.publish(Path(step.stream_path) if step.stream_path else journal_path(step.id))
        counts["steps_recovered"] += 1


def _fail_stuck_turns(counts: dict, now) -> None:
    live = set(running_turns())  # turns this process runs right now
    stale = now - timedelta(seconds=STALE_OPEN_SECONDS)
    open_steps = ProviderStep.objects.filter(ended_at__isnull=True).values("turn_id")
    stuck = UserTurn.objects.filter(phase__in=OPEN_PHASES, updated_at__lt=stale).exclude(
        pk__in=open_steps
    )
    for turn in stuck:
        if turn.pk in live:
            continue
        last = ProviderStep.objects.filter(turn=turn).order_by("-step_index").first()
        partial = None
        if last is not None:
            partial = next(
                (
                    i.get("blocks")
                    for i in last.normalized_items or []
                    if i.get("kind") == "assistant_message"
                ),
                None,
            )
        turn_fail(
            turn=turn,
            code="interrupted",
            message=f"the turn stopped in phase {turn.phase} (its process ended)",
            partial_blocks=partial,
        )
        counts["turns_failed"] += 1


def _remirror(counts: dict) -> None:
    missing = (
        UserTurn.objects.filter(Q(mirrored="") | Q(mirrored="user", phase__in=FINALIZED_PHASES))
        .select_related("branch")
        .order_by("branch_id", "turn_seq")
    )
    for turn in missing[:500]:
        if mirror_turn(turn) or turn.mirrored:
            counts["mirrored"] += 1


def _queue_summaries(counts: dict) -> None:
    firsts = (
        UserTurn.objects.filter(phase__in=FINALIZED_PHASES, state_after__isnull=True)
        .values("branch_id")
        .annotate(first=Min("turn_seq"))
    )
    for row in firsts:
        turn = UserTurn.objects.get(branch_id=row["branch_id"], turn_seq=row["first"])
        job = job_enqueue(job_type=JobType.SUMMARIZE_TURN, turn=turn)
        if job.state == JobState.PENDING:
            job_dispatch(job.pk)
        counts["summaries_queued"] += 1


def _queue_indexing(counts: dict) -> None:
    committed = UserTurn.objects.filter(
        Q(phase__in=[Phase.STATE_COMMITTED, Phase.INDEXED])
        | Q(phase=Phase.DONE, index_status=IndexStatus.DEGRADED)
    ).annotate(
        failures=Count(
            "jobs", filter=Q(jobs__job_type=JobType.INDEX_TURN, jobs__state=JobState.FAILED)
        )
    )
    for turn in committed[:500]:
        if turn.phase == Phase.DONE and turn.failures >= MAX_INDEX_ATTEMPTS:
            continue
        if not TurnJob.objects.filter(
            job_type=JobType.INDEX_TURN, turn=turn, state__in=[JobState.PENDING, JobState.RUNNING]
        ).exists():
            job_enqueue(job_type=JobType.INDEX_TURN, turn=turn)
            counts["indexing_queued"] += 1


def _redispatch(counts: dict, now) -> None:
    expired = TurnJob.objects.filter(state=JobState.RUNNING, lease_until__lt=now)
    unpicked = TurnJob.objects.filter(
        Q(lease_until__isnull=True) | Q(lease_until__lt=now),
        state=JobState.PENDING,
        updated_at__lt=now - timedelta(seconds=UNPICKED_JOB_SECONDS),
    )
    for job_id in expired.values_list("pk", flat=True):
        job_dispatch(job_id)
        counts["leases_reclaimed"] += 1
    for job_id, created_at, lease in unpicked.values_list("pk", "created_at", "lease_until")[:500]:
        # A job waiting behind busy workers is still in the queue: queue it again at most
        # once per spacing that grows with its age, claimed with compare-and-set on the
        # lease (unused on a pending job otherwise), so several worker processes' passes
        # never queue it twice (issue 46: every pass in every process re-queued it).
        spacing = max(timedelta(seconds=UNPICKED_JOB_SECONDS), (now - created_at) / 2)
        same = Q(lease_until__isnull=True) if lease is None else Q(lease_until=lease)
        if TurnJob.objects.filter(same, pk=job_id, state=JobState.PENDING).update(
            lease_until=now + spacing
        ):
            job_dispatch(job_id)
            counts["jobs_redispatched"] += 1


def reconcile(now=None) -> dict:
    """One reconciliation pass; returns what it did, by kind."""
    now = now or timezone.now()
    counts = dict.fromkeys(
        (
            "steps_recovered",
            "turns_failed",
            "mirrored",
            "summaries_queued",
            "indexing_queued",
            "leases_reclaimed",
            "jobs_redispatched",
        ),
        0,
    )
    for stage in (_recover_open_steps, _fail_stuck_turns):
        stage(counts, now)
    _remirror(counts)
    _queue_summaries(counts)
    _queue_indexing(counts)
    _redispatch(counts, now)
    if any(counts.values()):
        logger.info("reconciler: %s", counts)
    return counts


# --- where it runs -------------------------------------------------------------------------

SCHEDULE_NAME = "lcm-turns-reconcile"


def ensure_schedule(**kwargs) -> None:
    """post_migrate: the every-minute django-q Schedule (created once, idempotent)."""
    periodic.ensure_schedule(name=SCHEDULE_NAME, func="turns.tasks.run_reconcile")


def install_worker_hooks() -> None:
    """Each django-q2 worker process runs the turn reconciler when it spawns, then every
    LCM_RECONCILE_INTERVAL_SECONDS seconds."""
    periodic.on_worker_spawn(
        name=SCHEDULE_NAME,
        work=reconcile,
        interval=lambda: float(settings.LCM_RECONCILE_INTERVAL_SECONDS),
    )
