"""SIGTERM stops `manage.py qcluster` and `manage.py lcm_serve` within 10 s, in the middle
of a compaction: the pass in flight is finished (or was never written), the job is released
and a healthy worker finishes it."""

from __future__ import annotations

import signal
import time

import pytest

from compaction.services import job_request
from conversations.models import Summary
from tests.factories import append_messages
from tests.support.fake_messages_api import message
from tests.turns.live import free_port
from tests.workers.processes import (
    assert_consistent,
    group_alive,
    jobs_terminal,
    kill_group,
    start_server,
    start_worker,
    wait_for,
    worker_env,
)

pytestmark = pytest.mark.process

MESSAGES = 300


@pytest.fixture
def no_autocompact(settings):
    settings.LCM_AUTOCOMPACT_DISABLED = True


@pytest.mark.django_db(transaction=True)
def test_sigterm_stops_the_worker_mid_compaction_within_10s_and_releases_the_job(
    make_conversation, fake_messages_api, no_autocompact
):
    conversation = make_conversation(messages=0)
    append_messages(conversation, MESSAGES)
    job, _ = job_request(conversation=conversation, reason="manual", mode="full")
    # each summary call takes 0.5 s: the compaction has many passes in flight
    fake_messages_api.enqueue(*[message("A short summary.", delay=0.5) for _ in range(600)])
    worker = start_worker(worker_env(fake_messages_api))
    try:
        wait_for(lambda: len(fake_messages_api.requests) >= 3, timeout=60)
        started = time.monotonic()
        worker.send_signal(signal.SIGTERM)  # the cluster's main process only
        worker.wait(15)
        stopped_in = time.monotonic() - started
        group_left = group_alive(worker)
    finally:
        kill_group(worker)
    print(f"qcluster stopped {stopped_in:.2f}s after SIGTERM")
    assert stopped_in < 10
    assert not group_left  # no worker process outlived the cluster
    job.refresh_from_db()
    assert job.state in ("running", "succeeded")
    if job.state == "running":  # released: expired lease, queued again
        assert job.error == "released: its worker stopped"
    made = Summary.objects.filter(conversation=conversation).count()
    assert made >= 1

    healthy = start_worker(worker_env(fake_messages_api))
    try:
        took = wait_for(jobs_terminal, timeout=120, step=0.2)
    finally:
        kill_group(healthy)
    print(f"a healthy worker finished the released job in {took:.1f}s")
    job.refresh_from_db()
    assert job.state == "succeeded"
    assert Summary.objects.filter(conversation=conversation).count() > made
    assert_consistent({conversation.pk: MESSAGES})


@pytest.mark.django_db(transaction=True)
def test_sigterm_stops_lcm_serve_and_its_worker_within_10s(
    make_conversation, fake_messages_api, no_autocompact
):
    conversation = make_conversation(messages=0)
    append_messages(conversation, MESSAGES)
    job, _ = job_request(conversation=conversation, reason="manual", mode="full")
    fake_messages_api.enqueue(*[message("A short summary.", delay=0.5) for _ in range(600)])
    server = start_server(worker_env(fake_messages_api), worker=True, port=free_port())
    try:
        wait_for(lambda: len(fake_messages_api.requests) >= 3, timeout=60)
        started = time.monotonic()
        server.send_signal(signal.SIGTERM)
        server.wait(20)
        stopped_in = time.monotonic() - started
        group_left = group_alive(server)
    finally:
        kill_group(server)
    print(f"lcm_serve (with its worker) stopped {stopped_in:.2f}s after SIGTERM")
    assert stopped_in < 10
    assert not group_left
    job.refresh_from_db()
    assert job.state in ("running", "succeeded")
    if job.state == "running":
        assert job.error == "released: its worker stopped"
