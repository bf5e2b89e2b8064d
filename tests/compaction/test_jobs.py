from __future__ import annotations

import pytest
from django.test import Client
from django.utils import timezone
from django_q.models import OrmQ

from compaction.models import CompactionJob, CompactionRun, JobState
from compaction.services import job_request, job_run
from compaction.tasks import run_compaction_job
from conversations.models import Summary
from tests.factories import UserFactory, append_messages


def queued_compactions() -> int:
    """Queued compaction tasks (other apps, such as memory indexing, queue their own)."""
    return sum(1 for queued in OrmQ.objects.all() if queued.func().startswith("compaction.tasks."))


def test_an_ingest_past_the_leaf_chunk_enqueues_one_threshold_job(
    conversation, small_chunks, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        append_messages(conversation, 10)
    assert not CompactionJob.objects.exists()

    with django_capture_on_commit_callbacks(execute=True):
        append_messages(conversation, 40, start=10)
        append_messages(conversation, 5, start=50)

    job = CompactionJob.objects.get(conversation=conversation)
    assert (job.reason, job.mode, job.state) == ("threshold", "incremental", "pending")
    assert queued_compactions() == 1
    assert not Summary.objects.exists()


def test_an_ingest_over_the_context_threshold_asks_for_until_under(
    make_conversation, small_chunks, django_capture_on_commit_callbacks
):
    conversation = make_conversation(token_budget=600)

    with django_capture_on_commit_callbacks(execute=True):
        append_messages(conversation, 30)

    job = CompactionJob.objects.get(conversation=conversation)
    # due at the threshold (0.75 x 600), compacted down to the low-water mark (0.5 x 600)
    assert (job.mode, job.target_tokens) == ("until_under", 300)


def test_the_low_water_mark_never_exceeds_the_threshold(
    make_conversation, small_chunks, settings, django_capture_on_commit_callbacks
):
    settings.LCM_COMPACTION_LOW_WATER = 0.9
    conversation = make_conversation(token_budget=600)

    with django_capture_on_commit_callbacks(execute=True):
        append_messages(conversation, 30)

    job = CompactionJob.objects.get(conversation=conversation)
    assert (job.mode, job.target_tokens) == ("until_under", 450)


@pytest.mark.parametrize("switch", ["LCM_AUTOCOMPACT_DISABLED", "LCM_ENABLED"])
def test_automatic_jobs_respect_the_switches(
    conversation, small_chunks, settings, switch, django_capture_on_commit_callbacks
):
    setattr(settings, switch, switch == "LCM_AUTOCOMPACT_DISABLED")

    with django_capture_on_commit_callbacks(execute=True):
        append_messages(conversation, 60)

    assert not CompactionJob.objects.exists()
    assert queued_compactions() == 0


def test_a_job_is_claimed_once(conversation, small_chunks):
    append_messages(conversation, 60)
    job, created = job_request(conversation=conversation, reason="manual", mode="full")

    first = run_compaction_job(job.pk)
    second = run_compaction_job(job.pk)

    assert created is True
    assert first["state"] == "succeeded"
    assert second is None
    assert CompactionRun.objects.filter(conversation=conversation).count() == 1


def test_a_job_whose_worker_died_after_applying_is_retried_without_duplicates(
    conversation, small_chunks
):
    append_messages(conversation, 120)
    job, _ = job_request(conversation=conversation, reason="manual", mode="full")
    job_run(job_id=job.pk)
    made = set(Summary.objects.values_list("id", flat=True))
    # The worker "died" right after its last commit: the job still says running, long ago.
    CompactionJob.objects.filter(pk=job.pk).update(
        state=JobState.RUNNING, started_at=timezone.now() - timezone.timedelta(hours=2)
    )

    retried = job_run(job_id=job.pk)

    assert retried.state == "succeeded"
    assert retried.attempts == 2
    assert retried.result["status"] == "nothing_to_do"
    assert set(Summary.objects.values_list("id", flat=True)) == made


class Crash(Exception):
    pass


class CrashingAfter:
    """A summarizer that dies (like a killed worker) on its n-th call."""

    name = "deterministic"

    def __init__(self, calls: int):
        from compaction.summarizers import DeterministicSummarizer

        self.inner = DeterministicSummarizer()
        self.left = calls

    def summarize(self, request):
        if self.left == 0:
            raise Crash("worker killed")
        self.left -= 1
        return self.inner.summarize(request)


def test_a_run_that_crashed_midway_resumes_to_the_same_summaries_as_a_clean_run(
    make_conversation, small_chunks
):
    crashed = make_conversation(messages=0)
    clean = make_conversation(messages=0)
    append_messages(crashed, 150)
    job, _ = job_request(conversation=crashed, reason="manual", mode="full")
    with pytest.raises(Crash):
        job_run(job_id=job.pk, summarizer=CrashingAfter(2))
    assert Summary.objects.filter(conversation=crashed).count() == 2
    assert CompactionRun.objects.get(conversation=crashed).status == "failed"

    from compaction.engine import compact_conversation

    resumed = compact_conversation(conversation_id=crashed.pk, mode="full")
    append_messages(clean, 150)
    reference = compact_conversation(conversation_id=clean.pk, mode="full")

    crashed_kinds = sorted(
        Summary.objects.filter(conversation=crashed).values_list("kind", "depth", "token_count")
    )
    clean_kinds = sorted(
        Summary.objects.filter(conversation=clean).values_list("kind", "depth", "token_count")
    )
    assert crashed_kinds == clean_kinds
    assert len(resumed.summaries_created) == len(reference.summaries_created) - 2


def test_the_admin_action_queues_compaction(conversation, small_chunks):
    admin = UserFactory(username="root", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(admin)

    response = client.post(
        "/admin/conversations/conversation/",
        {"action": "compact_now", "_selected_action": [conversation.pk]},
        follow=True,
    )

    assert response.status_code == 200
    assert "Queued 1 compaction job(s); 0 already had one pending." in response.content.decode()
    job = CompactionJob.objects.get(conversation=conversation)
    assert (job.reason, job.mode, job.state) == ("manual", "full", "pending")


def test_the_after_ingest_check_costs_a_fixed_number_of_queries(
    make_conversation, small_chunks, django_assert_num_queries
):
    from compaction.services import schedule_after_append

    short = make_conversation(messages=20)
    long = make_conversation(messages=300)
    small_chunks.LCM_LEAF_CHUNK_TOKENS = 10**6

    for conversation in (short, long):
        # is a job pending (no), then one statement: figures, budget
        with django_assert_num_queries(2):
            schedule_after_append(conversation.pk)
    job_request(conversation=long, reason="manual", mode="full")
    with django_assert_num_queries(1):  # a job is pending: nothing else is read
        schedule_after_append(long.pk)
    assert CompactionJob.objects.count() == 1
