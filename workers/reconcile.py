"""The job reconciler: finds background jobs whose worker died and hands them out again.

`reconcile_jobs()` is idempotent and safe in several processes at once (claims are
compare-and-set, so a job dispatched twice still runs once). It:
1. closes compaction runs whose lease expired (the conversation's compaction lock is free
   again; each applied pass was its own transaction, so nothing is half-applied);
2. fails compaction jobs whose lease expired after LCM_JOB_MAX_ATTEMPTS claims (a job
   that kills its worker every time must not loop forever);
3. re-dispatches the other expired compaction jobs (the claim takes them over);
4. re-dispatches pending compaction jobs nobody picked up (a lost queue entry), spaced
   out by the job's age and claimed, so several workers never queue one job twice;
5. does 2 and 3 for scheduled integrity scans (`integrity.tasks`);
6. queues an indexing job for each conversation whose messages are not all indexed and
   that no job holds or waits for (memory.index_lag: its job failed or its worker died).

Turn jobs have their own reconciler (turns/reconcile.py, the same lease idea).

It runs in every worker process when it spawns and then every LCM_JOB_RECONCILE_SECONDS
(a timer thread), and from a django-q Schedule every minute as a fallback.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from compaction.models import CompactionJob, CompactionRun, JobState, RunStatus
from core import periodic

logger = logging.getLogger("lcm.workers")

# A pending job younger than this may simply be waiting in the queue.
UNPICKED_JOB_SECONDS = 30


def reconcile_jobs(now=None) -> dict:
    """One pass; returns what it did, by kind."""
    from compaction.services import TAKEOVER_GRACE, _enqueue

    now = now or timezone.now()
    counts = dict.fromkeys(
        ("runs_abandoned", "jobs_failed", "jobs_reclaimed", "jobs_redispatched"), 0
    )
    counts["runs_abandoned"] = CompactionRun.objects.filter(
        status=RunStatus.RUNNING, lease_until__lt=now
    ).update(status=RunStatus.FAILED, finished_at=now, detail="abandoned (worker lease expired)")
    expired = CompactionJob.objects.filter(
        state=JobState.RUNNING, lease_until__lt=now - TAKEOVER_GRACE
    )
    counts["jobs_failed"] = expired.filter(attempts__gte=settings.LCM_JOB_MAX_ATTEMPTS).update(
        state=JobState.FAILED,
        error="abandoned: its worker stopped on every attempt",
        finished_at=now,
    )
    for job_id in expired.values_list("pk", flat=True):
        _enqueue(job_id)
        counts["jobs_reclaimed"] += 1
    counts["jobs_redispatched"] = _redispatch_unpicked(now, _enqueue)
    from integrity.tasks import reconcile_integrity_jobs

    counts["integrity_failed"], counts["integrity_redispatched"] = reconcile_integrity_jobs(now)
    from memory.index_lag import requeue_behind

    counts["index_requeued"] = requeue_behind(now)
    if any(counts.values()):
        logger.info("job reconciler: %s", counts)
    return counts


def _redispatch_unpicked(now, enqueue) -> int:
    """Pending compaction jobs nobody picked up are queued again (a lost queue entry), at
    most once per spacing, however many worker processes run this pass: the spacing is
    claimed with compare-and-set on the job's lease, and it grows with the job's age (half
    of it, at least UNPICKED_JOB_SECONDS). A job that waits because every worker is busy
    is still in the queue; re-queuing it every 30 s in every worker process is what filled
    django-q's queue table (690 rows) before issue 46."""
    redispatched = 0
    unpicked = CompactionJob.objects.filter(
        Q(lease_until__isnull=True) | Q(lease_until__lt=now),
        state=JobState.PENDING,
        created_at__lt=now - timedelta(seconds=UNPICKED_JOB_SECONDS),
    )
    for job_id, created_at, lease_until in list(
        unpicked.values_list("pk", "created_at", "lease_until")[:500]
    ):
        spacing = max(timedelta(seconds=UNPICKED_JOB_SECONDS), (now - created_at) / 2)
        # On a pending job the lease only spaces out re-dispatches; the update is the claim.
        claimed = (
            CompactionJob.objects.filter(pk=job_id, state=JobState.PENDING)
            .filter(
                Q(lease_until__isnull=True) if lease_until is None else Q(lease_until=lease_until)
            )
            .update(lease_until=now + spacing)
        )
        if claimed:
            enqueue(job_id)
            redispatched += 1
    return redispatched


# --- where it runs -------------------------------------------------------------------------

SCHEDULE_NAME = "lcm-jobs-reconcile"


def ensure_schedule(**kwargs) -> None:
    """post_migrate: the every-minute django-q Schedule (created once, idempotent)."""
    periodic.ensure_schedule(name=SCHEDULE_NAME, func="workers.tasks.run_reconcile_jobs")


def install_worker_hooks() -> None:
    """Each django-q2 worker process runs the job reconciler when it spawns, then every
    LCM_JOB_RECONCILE_SECONDS seconds."""
    periodic.on_worker_spawn(
        name=SCHEDULE_NAME,
        work=reconcile_jobs,
        interval=lambda: float(settings.LCM_JOB_RECONCILE_SECONDS),
    )
