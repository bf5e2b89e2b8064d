"""SIGKILL the background worker (a real `manage.py qcluster`) while messages are ingested
and indexed, 3 times (12 with --slow), the last time while a job holds conversations after
the last append; then a restarted worker catches every conversation up by itself (issue
43: a killed job had cleared the queued marks of the conversations it took, and nothing
queued them again).

Checked afterwards: every conversation indexed to its last message, each message's unit
stored once, no lease left, and the lag the metrics report is zero."""

from __future__ import annotations

import random
import time

import pytest
from django.db.models import Count

from memory.index_lag import indexing_lag
from memory.models import Chunk, MessageIndexCursor
from tests.factories import append_messages
from tests.support import suite
from tests.workers.processes import kill_group, start_worker, wait_for, worker_env

pytestmark = pytest.mark.process

KILLS = suite.count(ci=3, slow_count=12)
CONVERSATIONS = 6
PER_ROUND = 60  # messages appended to each conversation per round


def _leased() -> bool:
    return MessageIndexCursor.objects.filter(lease_until__isnull=False).exists()


def _caught_up() -> bool:
    return indexing_lag().conversations == 0


@pytest.mark.django_db(transaction=True)
def test_indexing_catches_every_conversation_up_after_the_worker_is_killed_mid_ingest(
    make_conversation,
):
    conversations = [make_conversation() for _ in range(CONVERSATIONS)]
    env = worker_env(
        LCM_JOB_LEASE_SECONDS="3",
        LCM_JOB_RECONCILE_SECONDS="1",
        LCM_MEMORY_INDEX_REQUEUE_SECONDS="4",
        LCM_MEMORY_INDEX_JOB_SECONDS="1",
        LCM_MEMORY_INDEX_BATCH_CONVERSATIONS="3",
    )
    rng = random.Random(43)
    appended = 0
    for kill in range(KILLS):
        worker = start_worker(env)
        try:
            for conversation in conversations:  # appends while the worker indexes
                append_messages(conversation, PER_ROUND, start=appended)
            appended += PER_ROUND
            wait_for(_leased, timeout=60, step=0.02)  # a job holds conversations now
            if kill < KILLS - 1:
                time.sleep(rng.uniform(0.0, 0.8))  # a random point: embedding, storing
        finally:
            kill_group(worker)
    assert not _caught_up()  # the last kill left conversations behind, marks cleared

    started = time.monotonic()
    worker = start_worker(env)
    try:
        wait_for(_caught_up, timeout=120, step=0.2)
    finally:
        kill_group(worker)
    print(f"{KILLS} kills; caught up {time.monotonic() - started:.1f}s after the restart")

    for conversation in conversations:
        cursor = MessageIndexCursor.objects.get(conversation=conversation)
        assert cursor.last_seq == appended
        seqs = Chunk.objects.filter(conversation=conversation).values_list("seq_start", flat=True)
        assert set(seqs) == set(range(1, appended + 1))  # every message has its units
    repeated = (
        Chunk.objects.values("conversation_id", "seq_start", "start_offset")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
    )
    assert not repeated.exists()  # a unit is stored once, whatever the kills interrupted
    assert not MessageIndexCursor.objects.filter(behind_since__isnull=False).exists()
    assert indexing_lag().oldest_seconds == 0
