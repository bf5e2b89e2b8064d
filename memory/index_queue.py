"""Queueing the messages-API indexing job (memory.tasks.index_conversation).

A conversation's cursor row (`MessageIndexCursor`) carries the marks that keep the shared
job queue small and no conversation behind:
- `queued_at`: a job is queued and not started. An append queues a job only when there is
  none (compare-and-set), so a burst of appends costs one job; a job clears the mark when
  it takes the conversation. A mark older than LCM_MEMORY_INDEX_REQUEUE_SECONDS is
  presumed lost, and the next append (or the worker's reconciler, memory.index_lag)
  queues again.
- `behind_since`: when the conversation last fell behind; the lag metrics read it.

The lease a running job holds is memory.indexing's.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from conversations.search.query import as_datetime
from core.job_queues import enqueue
from memory.models import MessageIndexCursor

logger = logging.getLogger("lcm.memory")

TASK = "memory.tasks.index_conversation"

_CURSOR = MessageIndexCursor._meta.db_table
# One statement (it runs after every API append): create the cursor marked "queued", or
# mark an existing one whose mark is clear or stale; a row comes back only if this caller
# set the mark. PostgreSQL and SQLite (3.35+) both speak this upsert with RETURNING.
_CLAIM_SQL = (
    f"INSERT INTO {_CURSOR} (conversation_id, last_seq, queued_at, behind_since, updated_at)"
    " VALUES (%s, 0, %s, %s, %s)"
    " ON CONFLICT (conversation_id) DO UPDATE SET queued_at = excluded.queued_at,"
    f" behind_since = COALESCE({_CURSOR}.behind_since, excluded.behind_since)"
    f" WHERE {_CURSOR}.queued_at IS NULL OR {_CURSOR}.queued_at < %s"
    " RETURNING conversation_id"
)

# Read first: while a job is queued (the common case under steady ingest) the answer is
# no, and a plain read writes nothing, whereas the upsert's ON CONFLICT locks the row even
# when its WHERE refuses the update: on PostgreSQL a row lock is a WAL record, and the
# commit then waits for the disk (0.6 ms per append here).
_QUEUED_SQL = f"SELECT queued_at FROM {_CURSOR} WHERE conversation_id = %s"


def stale_before(now):
    """A queued mark set before this is presumed lost."""
    return now - timedelta(seconds=settings.LCM_MEMORY_INDEX_REQUEUE_SECONDS)


def _claim_queue_slot(conversation_id: int) -> bool:
    """True when this caller should queue the conversation's indexing job: no job is
    queued and not yet started (compare-and-set on the cursor row, safe across processes)."""
    now = timezone.now()
    stale = stale_before(now)
    with connection.cursor() as cursor:
        cursor.execute(_QUEUED_SQL, [conversation_id])
        row = cursor.fetchone()
        if row is not None and row[0] is not None and as_datetime(row[0]) >= stale:
            return False
        adapt = connection.ops.adapt_datetimefield_value
        cursor.execute(
            _CLAIM_SQL, [conversation_id, adapt(now), adapt(now), adapt(now), adapt(stale)]
        )
        return cursor.fetchone() is not None


def _enqueue(conversation_id: int) -> None:
    # The main queue by name, from whichever cluster this runs in (core/job_queues.py).
    enqueue(TASK, conversation_id)


def schedule_after_append(conversation_id: int) -> None:
    """The ingest hook (on commit): queue a background indexing job. Never raises."""
    if not settings.LCM_MEMORY_INDEX_MESSAGES:
        return
    try:
        if not _claim_queue_slot(conversation_id):
            return  # a queued job has not started yet: it will index this append too
        _enqueue(conversation_id)
    except Exception:
        logger.exception("queueing memory indexing failed for conversation %s", conversation_id)


def requeue(conversation_ids, *, unless_queued_since=None) -> list[int]:
    """Mark these conversations queued and queue a job for each. With
    `unless_queued_since` (the reconciler), only those whose lease is free and whose mark
    is clear or older than it, each row a compare-and-set, so reconcilers in several
    processes queue a conversation once. Returns the conversations queued."""
    ids = list(conversation_ids)
    if not ids:
        return []
    now = timezone.now()
    MessageIndexCursor.objects.bulk_create(
        [MessageIndexCursor(conversation_id=c) for c in ids], ignore_conflicts=True
    )
    queued = []
    for conversation_id in ids:
        row = MessageIndexCursor.objects.filter(conversation_id=conversation_id)
        if unless_queued_since is not None:
            row = row.exclude(lease_until__gte=now).exclude(queued_at__gte=unless_queued_since)
        if row.update(queued_at=now, behind_since=Coalesce("behind_since", Value(now))):
            queued.append(conversation_id)
            _enqueue(conversation_id)
    return queued
