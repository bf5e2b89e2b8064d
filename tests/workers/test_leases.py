"""Job leases and the job reconciler: a job whose worker died is taken over, never run
twice at once, and a retry writes no duplicate summary."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from compaction.engine import compact_conversation
from compaction.models import CompactionJob, CompactionRun, JobState
from compaction.services import job_claim, job_request, job_run
from conversations.models import Summary
from core import shutdown
from tests.factories import append_messages
from tests.support.concurrent import run_together
from workers.reconcile import reconcile_jobs


def _as_if_killed(job: CompactionJob, *, seconds_ago: int = 40) -> None:
    """What SIGKILL leaves: the job and its run still `running`, renewals stopped."""
    past = timezone.now() - timedelta(seconds=seconds_ago)
    CompactionJob.objects.filter(pk=job.pk).update(
        state=JobState.RUNNING, lease_until=past, attempts=1, started_at=past
    )
    CompactionRun.objects.create(
        conversation_id=job.conversation_id,
        reason="manual",
        mode="full",
        started_at=past,
        lease_until=past,
    )


def test_a_claim_sets_a_lease_and_a_live_lease_blocks_a_second_claim(conversation, small_chunks):
    append_messages(conversation, 60)
    job, _ = job_request(conversation=conversation, reason="manual", mode="full")

    claimed = job_claim(job_id=job.pk)
    again = job_claim(job_id=job.pk)

    assert claimed.state == "running" and claimed.attempts == 1
    lease = (claimed.lease_until - timezone.now()).total_seconds()
    assert 25 < lease <= 30
    assert again is None
    assert CompactionJob.objects.get(pk=job.pk).attempts == 1


def test_the_reconciler_reruns_a_job_whose_worker_died(conversation, small_chunks, sync_queue):
    append_messages(conversation, 120)
    job, _ = job_request(conversation=conversation, reason="manual", mode="full")
    _as_if_killed(job)

    counts = reconcile_jobs()

    assert counts == {
        "runs_abandoned": 1,
        "jobs_failed": 0,
        "jobs_reclaimed": 1,
        "jobs_redispatched": 0,
        "integrity_failed": 0,
        "integrity_redispatched": 0,
        "index_requeued": 1,  # the test's appends ran no hooks: not indexed, and no job
    }
    job.refresh_from_db()
    assert (job.state, job.attempts, job.lease_until) == ("succeeded", 2, None)
    assert job.result["status"] == "compacted"
    runs = list(CompactionRun.objects.order_by("pk").values_list("status", "detail"))
    assert runs[0] == ("failed", "abandoned (worker lease expired)")
    assert runs[1][0] == "compacted"


def test_the_reconciler_leaves_a_live_lease_alone(conversation, small_chunks, sync_queue):
    append_messages(conversation, 60)
    job, _ = job_request(conversation=conversation, reason="manual", mode="full")
    job_claim(job_id=job.pk)

    counts = reconcile_jobs()

    assert counts.pop("index_requeued") == 1  # the appends ran no hooks (not indexed)
    assert set(counts.values()) == {0}
    assert CompactionJob.objects.get(pk=job.pk).state == "running"
    assert not Summary.objects.exists()


def test_a_job_whose_worker_keeps_dying_is_failed_after_the_last_attempt(
    conversation, small_chunks, sync_queue
):
    sync_queue.LCM_JOB_MAX_ATTEMPTS = 1
    append_messages(conversation, 60)
    job, _ = job_request(conversation=conversation, reason="manual", mode="full")
    _as_if_killed(job)

    counts = reconcile_jobs()

    assert (counts["jobs_failed"], counts["jobs_reclaimed"]) == (1, 0)
    job.refresh_from_db()
    assert job.state == "failed"
    assert job.error == "abandoned: its worker stopped on every attempt"
    assert not Summary.objects.exists()


def test_a_pending_job_nobody_picked_up_is_dispatched_again(conversation, small_chunks, sync_queue):
    append_messages(conversation, 60)
    job, _ = job_request(conversation=conversation, reason="manual", mode="full")
    CompactionJob.objects.filter(pk=job.pk).update(created_at=timezone.now() - timedelta(minutes=5))

    counts = reconcile_jobs()

    assert counts["jobs_redispatched"] == 1
    assert CompactionJob.objects.get(pk=job.pk).state == "succeeded"


def test_a_retry_after_a_crash_makes_exactly_the_summaries_of_a_clean_run(
    make_conversation, small_chunks, sync_queue
):
    """Summary ids derive from their sources: the taken-over run re-derives the same ids
    for the passes the dead worker had applied, so nothing is written twice."""
    from tests.compaction.test_jobs import Crash, CrashingAfter

    crashed = make_conversation(messages=0)
    append_messages(crashed, 150)
    job, _ = job_request(conversation=crashed, reason="manual", mode="full")
    with pytest.raises(Crash):
        job_run(job_id=job.pk, summarizer=CrashingAfter(3))
    before = set(Summary.objects.values_list("id", flat=True))
    assert len(before) == 3
    _as_if_killed(job)  # the crash left the job running; its lease then ran out
    CompactionJob.objects.filter(pk=job.pk).update(attempts=1)

    reconcile_jobs()

    after = set(Summary.objects.values_list("id", flat=True))
    assert before < after
    # the same conversation compacted from scratch in a second, clean copy gives the same
    # shape, and re-running the finished job creates nothing
    again = compact_conversation(conversation_id=crashed.pk, mode="full")
    assert again.summaries_created == []
    assert set(Summary.objects.values_list("id", flat=True)) == after


def test_a_stopping_worker_finishes_its_pass_then_releases_the_job(
    conversation, small_chunks, settings
):
    append_messages(conversation, 150)
    job, _ = job_request(conversation=conversation, reason="manual", mode="full")

    class StopAfterFirstPass(CrashingAfterOne):
        pass

    shutdown.arm()
    try:
        released = job_run(job_id=job.pk, summarizer=StopAfterFirstPass())
    finally:
        shutdown._event.clear()

    assert released.state == "running"
    assert released.error == "released: its worker stopped"
    assert released.lease_until < timezone.now()
    assert Summary.objects.filter(conversation=conversation).count() == 1
    run = CompactionRun.objects.get(conversation=conversation)
    assert run.status == "failed" and "ShutdownRequested" in run.detail
    # a healthy worker takes it over at once and finishes
    finished = job_run(job_id=job.pk)
    assert (finished.state, finished.attempts) == ("succeeded", 2)


class CrashingAfterOne:
    """The deterministic summarizer, and a SIGTERM arriving during its first call."""

    name = "deterministic"

    def __init__(self):
        from compaction.summarizers import DeterministicSummarizer

        self.inner = DeterministicSummarizer()

    def summarize(self, request):
        shutdown.request()
        return self.inner.summarize(request)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_workers_racing_on_one_job_run_it_once(make_conversation, small_chunks):
    conversation = make_conversation(messages=0)
    append_messages(conversation, 150)
    job, _ = job_request(conversation=conversation, reason="manual", mode="full")
    # an expired lease: both racers see a job they may take over
    _as_if_killed(job)
    results = run_together(lambda: job_run(job_id=job.pk), times=4, timeout=60)

    won = [r for r in results if r is not None]
    assert len(results) == 4 and len(won) == 1
    assert (won[0].state, won[0].attempts) == ("succeeded", 2)
    assert CompactionRun.objects.filter(status="compacted").count() == 1
    ids = list(Summary.objects.values_list("id", flat=True))
    assert len(ids) == len(set(ids)) == len(won[0].result["summaries_created"])


def test_a_job_waiting_behind_busy_workers_is_not_queued_again_every_pass(
    conversation, small_chunks
):
    """No worker runs here (the ORM broker keeps what is queued): several worker processes'
    reconciler passes, 31 s apart, re-queue a waiting job at most once (issue 46: every
    30 s in every worker process before, 690 rows in django-q's queue table)."""
    from django_q.models import OrmQ

    append_messages(conversation, 60)
    job, _ = job_request(conversation=conversation, reason="manual", mode="full")
    start = timezone.now() + timedelta(minutes=5)
    CompactionJob.objects.filter(pk=job.pk).update(created_at=timezone.now())
    urgent = OrmQ.objects.filter(key="lcm-urgent")  # (the indexing re-queue is on "lcm")
    queued = urgent.count()  # (the first dispatch runs on commit: not in this test)

    passes = []
    for step in range(5):
        now = start + timedelta(seconds=31 * step)
        passes.extend(reconcile_jobs(now=now)["jobs_redispatched"] for _ in range(3))

    assert sum(passes) == 1, passes
    assert urgent.count() == queued + 1
    assert CompactionJob.objects.get(pk=job.pk).state == "pending"
