"""SIGKILL the background worker (a real `manage.py qcluster`, its whole process group) at
random points of compactions, 4 times (20 with --slow); then one healthy worker finishes everything. And a
job orphaned by a dead worker is re-run by a healthy one within 60 s with default settings.

Checked afterwards: 0 lost or duplicated messages, no message in two leaf summaries, 0
integrity problems (lineage, context, counters), every job and run terminal."""

from __future__ import annotations

import random
import time

import pytest
from django.db.models import Count

from compaction.models import CompactionJob
from compaction.services import job_request
from conversations.models import Summary, SummaryMessage
from tests.factories import append_messages
from tests.support import suite
from tests.support.fake_messages_api import message
from tests.workers.processes import (
    assert_consistent,
    jobs_terminal,
    kill_group,
    start_worker,
    wait_for,
    worker_env,
)

pytestmark = pytest.mark.process

KILLS = suite.count(ci=4, slow_count=20)
CONVERSATIONS = 4
MESSAGES = 240


@pytest.fixture
def no_autocompact(settings):
    settings.LCM_AUTOCOMPACT_DISABLED = True


@pytest.mark.django_db(transaction=True)
def test_killing_the_worker_at_random_points_of_compactions_loses_nothing(
    make_conversation, fake_messages_api, no_autocompact
):
    conversations = [make_conversation(messages=0) for _ in range(CONVERSATIONS)]
    for conversation in conversations:
        append_messages(conversation, MESSAGES)
        job_request(conversation=conversation, reason="manual", mode="full")
    fake_messages_api.enqueue(*[message("A short summary.", delay=0.15) for _ in range(3000)])
    env = worker_env(
        fake_messages_api,
        LCM_JOB_LEASE_SECONDS="3",
        LCM_JOB_RECONCILE_SECONDS="1",
        LCM_JOB_MAX_ATTEMPTS="1000",
    )
    rng = random.Random(12)
    kills, extra_rounds = 0, 0
    deadline = time.monotonic() + 240
    while kills < KILLS and time.monotonic() < deadline:
        if jobs_terminal():  # everything finished between kills: give it more to do
            extra_rounds += 1
            for conversation in conversations:
                append_messages(conversation, 40, start=MESSAGES + 40 * extra_rounds)
                job_request(conversation=conversation, reason="manual", mode="full")
        seen = len(fake_messages_api.requests)
        worker = start_worker(env)
        try:
            wait_for(
                lambda seen=seen: len(fake_messages_api.requests) > seen, timeout=60, step=0.02
            )
            time.sleep(rng.uniform(0.0, 0.6))  # a random point: mid-call, mid-apply, between
        finally:
            kill_group(worker)
        kills += 1
    assert kills == KILLS

    started = time.monotonic()
    worker = start_worker(env)
    try:
        wait_for(jobs_terminal, timeout=120, step=0.2)
    finally:
        kill_group(worker)
    recovered_in = time.monotonic() - started
    jobs = CompactionJob.objects.count()
    print(
        f"{kills} kills, {jobs} jobs, {extra_rounds} extra rounds; "
        f"recovered in {recovered_in:.1f}s; attempts max "
        f"{max(CompactionJob.objects.values_list('attempts', flat=True))}"
    )

    assert set(CompactionJob.objects.values_list("state", flat=True)) == {"succeeded"}
    assert_consistent({c.pk: MESSAGES + 40 * extra_rounds for c in conversations})
    twice = SummaryMessage.objects.values("message_id").annotate(n=Count("id")).filter(n__gt=1)
    assert not twice.exists()  # a retried pass re-derives its summary's id: no second copy
    assert Summary.objects.count() > 0


@pytest.mark.django_db(transaction=True)
def test_a_job_orphaned_by_a_dead_worker_is_rerun_by_a_healthy_one_within_60s(
    make_conversation, fake_messages_api, no_autocompact
):
    conversation = make_conversation(messages=0)
    append_messages(conversation, MESSAGES)
    job, _ = job_request(conversation=conversation, reason="manual", mode="full")
    fake_messages_api.enqueue(*[message("A short summary.", delay=0.3) for _ in range(600)])
    env = worker_env(fake_messages_api)  # default lease and reconcile interval
    doomed = start_worker(env)
    healthy = None
    try:
        wait_for(lambda: len(fake_messages_api.requests) >= 2, timeout=60)
        healthy = start_worker(env)
        time.sleep(3)  # the healthy worker is up before the other one dies
        kill_group(doomed)
        killed_at = time.monotonic()
        wait_for(jobs_terminal, timeout=90, step=0.2)
        rerun_in = time.monotonic() - killed_at
    finally:
        kill_group(doomed)
        if healthy is not None:
            kill_group(healthy)
    print(f"orphaned job finished by the healthy worker {rerun_in:.1f}s after the kill")
    job.refresh_from_db()
    assert (job.state, job.attempts) == ("succeeded", 2)
    assert rerun_in < 60
    assert_consistent({conversation.pk: MESSAGES})
