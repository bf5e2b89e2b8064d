"""How far message indexing is behind, and the worker's re-queue of conversations that
fell behind with no job to catch them up (docs/memory.md, "Indexing never leaves a
conversation behind").

A conversation is behind when its last message seq is past its cursor (no cursor: 0).
Conversations that back a chat branch are index_turn's and never counted. The age of a
conversation's oldest unindexed message is taken from the message's `created_at` (the
server's clock for an API append) but never older than the time the conversation fell
behind (`behind_since`), since an import may carry dates from long ago.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import connection
from django.utils import timezone

from conversations.models import Conversation, Message
from conversations.search.query import as_datetime
from core.metrics import Sample
from memory import index_queue
from memory.models import MessageIndexCursor
from turns.models import Branch

_BEHIND_SQL = f"""
SELECT c.id, c.last_seq, COALESCE(k.last_seq, 0), k.queued_at, k.lease_until,
       k.behind_since, m.created_at
FROM {Conversation._meta.db_table} c
LEFT JOIN {MessageIndexCursor._meta.db_table} k ON k.conversation_id = c.id
LEFT JOIN {Message._meta.db_table} m
       ON m.conversation_id = c.id AND m.seq = COALESCE(k.last_seq, 0) + 1
WHERE c.last_seq > COALESCE(k.last_seq, 0)
  AND NOT EXISTS (SELECT 1 FROM {Branch._meta.db_table} b WHERE b.conversation_id = c.id)
"""


@dataclass(frozen=True)
class Behind:
    """One conversation whose messages are not all indexed."""

    conversation_id: int
    messages: int  # not indexed yet
    queued_at: datetime | None
    lease_until: datetime | None
    since: datetime  # the oldest unindexed message was stored at or after this


@dataclass(frozen=True)
class IndexingLag:
    conversations: int
    messages: int
    oldest_seconds: float  # age of the oldest unindexed message (0: none)


def conversations_behind() -> list[Behind]:
    with connection.cursor() as cursor:
        cursor.execute(_BEHIND_SQL)
        rows = cursor.fetchall()
    out = []
    for conversation_id, last, indexed, queued, lease, behind_since, created in rows:
        times = [as_datetime(t) for t in (behind_since, created) if t is not None]
        out.append(
            Behind(
                conversation_id=conversation_id,
                messages=last - indexed,
                queued_at=as_datetime(queued) if queued is not None else None,
                lease_until=as_datetime(lease) if lease is not None else None,
                since=max(times) if times else timezone.now(),
            )
        )
    return out


def indexing_lag(now=None) -> IndexingLag:
    now = now or timezone.now()
    behind = conversations_behind()
    oldest = min((b.since for b in behind), default=now)
    return IndexingLag(
        conversations=len(behind),
        messages=sum(b.messages for b in behind),
        oldest_seconds=max(0.0, (now - oldest).total_seconds()),
    )


def requeue_behind(now=None, limit: int = 500) -> int:
    """The worker's reconciler step: queue a job for each conversation behind whose lease
    is free and whose queued mark is clear (its job failed, or its worker died after
    taking it) or presumed lost (older than LCM_MEMORY_INDEX_REQUEUE_SECONDS). Safe in
    several processes at once; returns how many it queued."""
    if not settings.LCM_MEMORY_INDEX_MESSAGES:
        return 0
    now = now or timezone.now()
    stale = index_queue.stale_before(now)
    candidates = [
        b.conversation_id
        for b in conversations_behind()
        if (b.lease_until is None or b.lease_until < now)
        and (b.queued_at is None or b.queued_at < stale)
    ]
    return len(index_queue.requeue(candidates[:limit], unless_queued_since=stale))


def collect():
    """/metrics: indexing lag (none while message indexing is switched off)."""
    if not settings.LCM_MEMORY_INDEX_MESSAGES:
        return
    lag = indexing_lag()
    yield Sample(
        "lcm_memory_index_conversations_behind",
        "gauge",
        "Conversations with messages not indexed yet (semantic memory).",
        (({}, float(lag.conversations)),),
    )
    yield Sample(
        "lcm_memory_index_messages_behind",
        "gauge",
        "Messages not indexed yet, over all conversations.",
        (({}, float(lag.messages)),),
    )
    yield Sample(
        "lcm_memory_index_oldest_unindexed_seconds",
        "gauge",
        "Age of the oldest message not indexed yet (0 when none is behind).",
        (({}, round(lag.oldest_seconds, 3)),),
    )
