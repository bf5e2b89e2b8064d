"""Compaction jobs: request one (at most one pending per conversation), schedule one after
an ingest when `evaluate` says so, and run one (claimed with compare-and-set)."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from compaction.engine import check_mode_and_reason, compact_conversation
from compaction.evaluation import context_figures, decide, pending_job_exists
from compaction.models import CompactionJob, JobState, Mode, Reason
from conversations.models import Conversation
from core import shutdown
from core.api.errors import Conflict, LcmError
from core.job_queues import enqueue
from core.leases import lease_deadline, lease_kept
from core.shutdown import ShutdownRequested

logger = logging.getLogger("lcm.compaction")

TASK = "compaction.tasks.run_compaction_job"
# A job claimed before job leases existed (no lease_until) is taken over this long after.
_STALE_JOB_GRACE_SECONDS = 60
# A job's lease is renewed alongside its run's; taking the job over this long after its
# lease expired finds the run's lease expired too (so no conflict with the dead run).
TAKEOVER_GRACE = timedelta(seconds=2)


def _enqueue(job_id: int) -> None:
    """On the urgent queue (core/job_queues.py): the next turn's context waits on it."""
    if settings.Q_CLUSTER.get("sync", False):
        enqueue(TASK, job_id, urgent=True)
        return
    # In a transaction: django-q's ORM broker closes the connection before an enqueue made
    # outside one (a reconnect per job with CONN_MAX_AGE 0).
    with transaction.atomic():
        enqueue(TASK, job_id, urgent=True)


def job_request(
    *,
    conversation: Conversation,
    reason: str,
    mode: str,
    target_tokens: int | None = None,
) -> tuple[CompactionJob, bool]:
    """Create a pending job and enqueue it on commit; if one is already pending for the
    conversation, return that one (created False) and enqueue nothing."""
    check_mode_and_reason(mode=mode, reason=reason)
    for _ in range(3):  # a pending job claimed between our insert and our read: try again
        try:
            with transaction.atomic():
                job = CompactionJob.objects.create(
                    conversation=conversation,
                    reason=reason,
                    mode=mode,
                    target_tokens=target_tokens,
                )
                transaction.on_commit(lambda job_id=job.pk: _enqueue(job_id))
                return job, True
        except IntegrityError:
            existing = CompactionJob.objects.filter(
                conversation=conversation, state=JobState.PENDING
            ).first()
            if existing is not None:
                return existing, False
    raise Conflict(
        f"could not queue a compaction job for conversation {conversation.pk}; retry shortly",
        retry_after=1.0,
    )


# Predicates (conversation_id -> bool) of higher layers: True means the conversation's
# summaries are never sent, so appending to it schedules no automatic compaction (the turn
# engine's `state` sessions, issue 46). A requested compaction still runs.
_autocompact_exempt: list = []


def register_autocompact_exemption(predicate) -> None:
    _autocompact_exempt.append(predicate)


def schedule_after_append(conversation_id: int) -> None:
    """The ingest hook (runs on commit): enqueue an automatic job when compaction is due.
    Never raises: ingest has already succeeded and must not see compaction problems."""
    _schedule(conversation_id, None, exemptions=True)


def schedule_for_budget(conversation_id: int, token_budget: int) -> None:
    """Enqueue an automatic job when compaction is due against `token_budget` instead of
    the conversation's own: the turn engine's effective budget when the model's window
    leaves less than the conversation's budget (docs/cost.md). The threshold and the
    low-water target follow that budget, so compaction, not the assembler's budget walk,
    decides what leaves the context, and the context's start stays put between passes.
    Never raises."""
    _schedule(conversation_id, token_budget)


def _exempt(conversation_id: int) -> bool:
    """Whether a higher layer says the conversation's summaries are never sent."""
    return any(exempt(conversation_id) for exempt in _autocompact_exempt)


def _schedule(conversation_id: int, token_budget: int | None, exemptions: bool = False) -> None:
    if not settings.LCM_ENABLED or settings.LCM_AUTOCOMPACT_DISABLED:
        return
    try:
        if pending_job_exists(conversation_id):
            return  # that job will see these messages too
        figures = context_figures(conversation_id, settings.LCM_FRESH_TAIL_COUNT)
        if figures["token_budget"] is None:
            return
        budget = figures["token_budget"] if token_budget is None else token_budget
        decision = decide(figures, token_budget=budget)
        # Asked only once compaction is due, so the ingest hook's usual path costs nothing.
        if exemptions and decision.due and _exempt(conversation_id):
            return
        if decision.due and decision.suggested_mode:
            job_request(
                conversation=Conversation(pk=conversation_id),
                reason=Reason.THRESHOLD,
                mode=decision.suggested_mode,
                target_tokens=decision.low_water_tokens
                if decision.suggested_mode == Mode.UNTIL_UNDER
                else None,
            )
    except Exception:
        logger.exception("scheduling compaction failed for conversation %s", conversation_id)


def compact_inline(conversation_id: int, token_budget: int) -> bool:
    """Compact the conversation now, in this process: the turn engine calls it when its
    budget walk would otherwise leave the oldest items out (issue 46), so compaction, not
    the walk, decides what leaves the context even when the workers are busy. It runs the
    pending job (the claim is compare-and-set, so a worker that dequeues it later finds
    it done), or queues one first when compaction is due against `token_budget`; a job a
    worker is already running is left to it. Returns whether a job ran to success. Never
    raises: the turn goes on with the walk's context."""
    if not settings.LCM_ENABLED or settings.LCM_AUTOCOMPACT_DISABLED:
        return False
    try:
        if not pending_job_exists(conversation_id):
            _schedule(conversation_id, token_budget)
        job = (
            CompactionJob.objects.filter(conversation_id=conversation_id, state=JobState.PENDING)
            .values_list("pk", flat=True)
            .first()
        )
        if job is None:
            return False
        done = job_run(job_id=job)
        return done is not None and done.state == JobState.SUCCEEDED
    except Exception:
        logger.exception("inline compaction failed for conversation %s", conversation_id)
        return False


def job_claim(*, job_id: int) -> CompactionJob | None:
    """Compare-and-set pending -> running with a lease, or take over a running job whose
    lease expired (its worker died). A stopping worker claims nothing."""
    if shutdown.requested():
        return None
    now = timezone.now()
    stale = now - timedelta(seconds=settings.LCM_COMPACTION_MAX_SECONDS + _STALE_JOB_GRACE_SECONDS)
    claimed = (
        CompactionJob.objects.filter(pk=job_id)
        .filter(
            Q(state=JobState.PENDING)
            | Q(state=JobState.RUNNING, lease_until__lt=now - TAKEOVER_GRACE)
            | Q(state=JobState.RUNNING, lease_until__isnull=True, started_at__lt=stale)
        )
        .update(
            state=JobState.RUNNING,
            started_at=now,
            lease_until=lease_deadline(now),
            attempts=F("attempts") + 1,
        )
    )
    return CompactionJob.objects.get(pk=job_id) if claimed else None


def job_release(*, job_id: int, attempts: int) -> None:
    """Give a running job up (the worker is stopping): its lease ends now and the job is
    queued again, so a healthy worker takes it over at once."""
    released = CompactionJob.objects.filter(
        pk=job_id, state=JobState.RUNNING, attempts=attempts
    ).update(
        lease_until=timezone.now() - TAKEOVER_GRACE - timedelta(seconds=1),
        error="released: its worker stopped",
    )
    if released:
        _enqueue(job_id)


def job_run(*, job_id: int, summarizer=None) -> CompactionJob | None:
    """Run a job if this worker wins the claim; the outcome is stored on the job."""
    job = job_claim(job_id=job_id)
    if job is None:
        return None
    state, result, error = JobState.FAILED, None, ""
    # `attempts` fences this claim: after a takeover, the old owner's writes match nothing.
    owned = CompactionJob.objects.filter(pk=job.pk, state=JobState.RUNNING, attempts=job.attempts)
    try:
        with lease_kept(owned):
            outcome = compact_conversation(
                conversation_id=job.conversation_id,
                mode=job.mode,
                reason=job.reason,
                target_tokens=job.target_tokens,
                summarizer=summarizer,
            )
        result = outcome.as_dict()
        state = JobState.FAILED if outcome.status == "failed" else JobState.SUCCEEDED
        error = outcome.detail if outcome.status == "failed" else ""
        run_id = outcome.run_id
    except ShutdownRequested:  # the passes applied so far stay; the rest goes to another worker
        job_release(job_id=job.pk, attempts=job.attempts)
        job.refresh_from_db()
        return job
    except LcmError as problem:  # a Conflict reads "conflict: ..."
        error, run_id = f"{problem.code}: {problem.message}", None
    except Exception as crash:
        owned.update(
            state=JobState.FAILED,
            error=f"error: {crash!r}",
            finished_at=timezone.now(),
            lease_until=None,
        )
        raise
    owned.update(
        state=state,
        result=result,
        error=error,
        run_id=run_id,
        finished_at=timezone.now(),
        lease_until=None,
    )
    job.refresh_from_db()
    return job
