"""SIGKILL the background worker (a real `manage.py qcluster`, its whole process group) in
the middle of the librarian, at random points, 3 times (10 with --slow); then start it
once more. The reconciler (at worker start, then every few seconds) and the job leases
finish the work: 0 duplicate state commits, 0 head corruption, every turn done."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import time

import pytest
from django.db.models import Count

from tests.factories import UserFactory
from tests.support import suite
from tests.support.fake_messages_api import message
from tests.turns.conftest import send
from tests.turns.live import ROOT, child_env
from turns import services
from turns.models import Branch, Phase, StateCheckpoint, TurnJob, UserTurn

pytestmark = pytest.mark.process

TURNS = 12
KILLS = suite.count(ci=3, slow_count=10)


def _start_worker(env: dict) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "qcluster"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: the kill takes the workers too
    )


def _kill(worker: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(worker.pid, signal.SIGKILL)
    worker.wait(10)


def _all_done(branch_id: str) -> bool:
    return not UserTurn.objects.filter(branch_id=branch_id).exclude(phase=Phase.DONE).exists()


@pytest.mark.django_db(transaction=True)
def test_killing_the_worker_mid_librarian_never_duplicates_a_commit(fake_messages_api):
    owner = UserFactory(username="crash")
    chat = services.session_create(owner=owner)
    branch_id = chat.active_branch_id
    for i in range(TURNS):
        send(chat, f"Turn {i}: we decided to keep lib/crash_{i}.py and call `recover_{i}()`.")
    # every librarian call takes 0.4 s (and misses entities: retry, then the fallback)
    fake_messages_api.enqueue(*[message("A vague summary.", delay=0.4) for _ in range(400)])
    env = child_env(
        ANTHROPIC_API_KEY="sk-ant-test-crash-worker",
        ANTHROPIC_BASE_URL=fake_messages_api.base_url,
        LCM_LIBRARIAN_MODEL="haiku",
        LCM_TURN_JOB_LEASE_SECONDS="5",
        LCM_RECONCILE_INTERVAL_SECONDS="5",
        LCM_WORKERS="1",
    )
    rng = random.Random(9)
    kills = 0
    deadline = time.monotonic() + 240
    while kills < KILLS and time.monotonic() < deadline and not _all_done(branch_id):
        seen = len(fake_messages_api.requests)
        worker = _start_worker(env)
        try:
            while len(fake_messages_api.requests) == seen and time.monotonic() < deadline:
                time.sleep(0.02)  # wait until the librarian is talking to the model
            time.sleep(rng.uniform(0.0, 0.9))  # then kill it at a random point
        finally:
            _kill(worker)
        kills += 1
    assert kills == KILLS, f"only {kills} kills happened before the work was done"

    started = time.monotonic()
    worker = _start_worker(env)
    try:
        while not _all_done(branch_id) and time.monotonic() - started < 120:
            time.sleep(0.25)
        recovered_in = time.monotonic() - started
    finally:
        _kill(worker)
    print(f"recovered {TURNS} turns in {recovered_in:.1f}s after {kills} kills")

    branch = Branch.objects.get(pk=branch_id)
    states = list(StateCheckpoint.objects.filter(branch=branch).order_by("state_seq"))
    assert [s.state_seq for s in states] == list(range(TURNS + 1))  # no duplicate, no gap
    assert all(s.parent_id == states[i].pk for i, s in enumerate(states[1:]))
    assert branch.head_state_id == states[-1].pk and branch.head_seq == TURNS
    per_turn = StateCheckpoint.objects.filter(source_turn__isnull=False).values("source_turn")
    assert all(row["n"] == 1 for row in per_turn.annotate(n=Count("id")))
    turns = list(UserTurn.objects.filter(branch=branch).order_by("turn_seq"))
    assert [t.phase for t in turns] == [Phase.DONE] * TURNS
    assert [t.state_after_id for t in turns] == [s.pk for s in states[1:]]
    # a job the last kill interrupted after its turn was done still holds a lease, so the
    # next reconcile takes it over (and finds nothing left to do)
    assert not TurnJob.objects.filter(state="running", lease_until__isnull=True).exists()
    assert recovered_in < 60
