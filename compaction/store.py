"""Store-level writes of compaction: a summary with its ordered lineage, and the
replacement of a context range by that summary, in one short transaction.

`apply_summary` is the only writer. It re-checks that the planned range of context items
is exactly what is there now (nothing compacted, inserted or removed meanwhile), and is
idempotent: summary ids are derived from the planned sources, so a retried apply finds
the summary already in place and writes nothing.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Max
from django.utils import timezone

from conversations import bulk
from conversations.models import (
    ContextItem,
    ItemType,
    MessagePart,
    PartType,
    Summary,
    SummaryKind,
    SummaryMessage,
    SummaryParent,
)
from core import locks

_CONTEXT = ContextItem._meta.db_table
logger = logging.getLogger("lcm.compaction")

# Called (on commit) with the conversation id after apply_summary wrote a summary; the
# memory app registers its summary indexing here, so compaction does not import it.
_after_summary_hooks: list[Callable[[int], None]] = []


def register_after_summary(hook: Callable[[int], None]) -> None:
    if hook not in _after_summary_hooks:
        _after_summary_hooks.append(hook)


# Set by `after_summary_hooks_once()`: the conversations whose hooks are held back.
_held_back: ContextVar[set[int] | None] = ContextVar("lcm_after_summary_held", default=None)


def _run_after_summary_hooks(conversation_id: int) -> None:
    """In one transaction (not with `sync` jobs, which run outermost transactions of
    their own): django-q's ORM broker closes the connection before an enqueue made
    outside one. A savepoint per hook, so one hook's database error spares the others."""
    if settings.Q_CLUSTER.get("sync"):
        for hook in _after_summary_hooks:
            hook(conversation_id)
        return
    with transaction.atomic():
        for hook in _after_summary_hooks:
            try:
                with transaction.atomic():
                    hook(conversation_id)
            except Exception:
                logger.exception("after-summary hook %s failed", getattr(hook, "__name__", hook))


@contextmanager
def after_summary_hooks_once():
    """Within the block, applied summaries do not fire the after-summary hooks one by
    one: they fire once per conversation when the block ends (a compaction run of 40
    passes queued 40 indexing jobs, each reconnecting to the database; the hooks'
    jobs read everything new anyway)."""
    held: set[int] = set()
    token = _held_back.set(held)
    try:
        yield
    finally:
        _held_back.reset(token)
        for conversation_id in sorted(held):
            transaction.on_commit(
                lambda conversation_id=conversation_id: _run_after_summary_hooks(conversation_id)
            )


class RangeChanged(Exception):
    """The planned context range is no longer there as planned; nothing was written."""


def summary_id_for(*, conversation_id: int, kind: str, depth: int, sources: Sequence) -> str:
    """Deterministic id from the sources: the same planned pass always gets the same id."""
    key = f"{conversation_id}:{kind}:{depth}:" + ",".join(str(s) for s in sources)
    return "sum_" + hashlib.sha256(key.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class NewSummary:
    id: str
    conversation_id: int
    kind: str
    depth: int
    level: str
    content: str
    token_count: int
    earliest_at: datetime
    latest_at: datetime
    descendant_count: int
    descendant_token_count: int
    source_token_count: int
    model: str
    file_ids: list[str]
    message_ids: Sequence[int] = ()  # leaf: its source messages, in order
    parent_ids: Sequence[str] = ()  # condensed: its source summaries, in order


@dataclass(frozen=True)
class CompactionEvent:
    """The `compaction` part recorded on the newest source message of a leaf pass."""

    message_id: int
    session_id: str
    automatic: bool
    metadata: dict = field(default_factory=dict)


def summary_create(summary: NewSummary, *, now: datetime) -> Summary:
    """Insert a summary and its ordered edges. Call inside the apply transaction."""
    if bool(summary.message_ids) == bool(summary.parent_ids):
        raise ValueError("a summary links to source messages or source summaries, not both")
    if (summary.kind == SummaryKind.LEAF) != bool(summary.message_ids):
        raise ValueError("leaf summaries link messages; condensed ones link summaries")
    row = Summary.objects.create(
        id=summary.id,
        conversation_id=summary.conversation_id,
        kind=summary.kind,
        depth=summary.depth,
        level=summary.level,
        content=summary.content,
        token_count=summary.token_count,
        earliest_at=summary.earliest_at,
        latest_at=summary.latest_at,
        descendant_count=summary.descendant_count,
        descendant_token_count=summary.descendant_token_count,
        source_token_count=summary.source_token_count,
        model=summary.model,
        file_ids=summary.file_ids,
        created_at=now,
    )
    # Plain multi-row inserts (COPY on PostgreSQL): a leaf can have hundreds of edges.
    if summary.message_ids:
        bulk.insert_rows(
            SummaryMessage,
            ("summary_id", "message_id", "conversation_id", "ordinal"),
            (
                (summary.id, message_id, summary.conversation_id, ordinal)
                for ordinal, message_id in enumerate(summary.message_ids)
            ),
        )
    else:
        bulk.insert_rows(
            SummaryParent,
            ("summary_id", "parent_summary_id", "conversation_id", "ordinal"),
            (
                (summary.id, parent_id, summary.conversation_id, ordinal)
                for ordinal, parent_id in enumerate(summary.parent_ids)
            ),
        )
    return row


def context_range_replace(
    *, conversation_id: int, planned_item_ids: Sequence[int], summary: Summary, now: datetime
) -> tuple[int, int]:
    """Replace exactly the planned context items (contiguous, in order) by one summary item
    at the first one's ordinal. Raises `RangeChanged` if the range differs from the plan.
    Call inside the apply transaction. Returns the new item's ordinal and id."""
    planned = list(planned_item_ids)
    # The items now between the planned first and last item, in one query.
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, ordinal FROM {_CONTEXT} WHERE conversation_id = %s AND ordinal BETWEEN"
            f" (SELECT ordinal FROM {_CONTEXT} WHERE id = %s AND conversation_id = %s)"
            f" AND (SELECT ordinal FROM {_CONTEXT} WHERE id = %s AND conversation_id = %s)"
            " ORDER BY ordinal",
            [conversation_id, planned[0], conversation_id, planned[-1], conversation_id],
        )
        found = cursor.fetchall()
    current = [row[0] for row in found]
    if current != planned:
        raise RangeChanged("the planned range changed since it was planned")
    first, last = found[0][1], found[-1][1]
    ContextItem.objects.filter(
        conversation_id=conversation_id, ordinal__range=(first, last)
    ).delete()
    item = ContextItem.objects.create(
        conversation_id=conversation_id,
        ordinal=first,
        item_type=ItemType.SUMMARY,
        summary=summary,
        token_count=summary.token_count,
        created_at=now,
    )
    return first, item.pk


def compaction_event_record(event: CompactionEvent) -> MessagePart:
    """Add a `compaction` part after the message's existing parts (never changing them)."""
    last = MessagePart.objects.filter(message_id=event.message_id).aggregate(m=Max("ordinal"))["m"]
    return MessagePart.objects.create(
        message_id=event.message_id,
        session_id=event.session_id,
        part_type=PartType.COMPACTION,
        ordinal=0 if last is None else last + 1,
        is_synthetic=True,
        compaction_auto=event.automatic,
        metadata=event.metadata,
    )


@dataclass(frozen=True)
class Applied:
    summary_id: str
    ordinal: int | None
    item_id: int | None
    already_applied: bool


def apply_summary(
    *,
    summary: NewSummary,
    planned_item_ids: Sequence[int],
    event: CompactionEvent | None = None,
    on_applied=None,
) -> Applied:
    """One short transaction: summary, edges, context replacement, compaction event.

    Idempotent: if the summary already exists (a retried apply), nothing is written.
    `on_applied(summary_row)` runs inside the transaction (the engine records its run).
    """
    now = timezone.now()
    with transaction.atomic(durable=True):
        locks.lock(locks.LockKind.COMPACTION, summary.conversation_id)
        if Summary.objects.filter(pk=summary.id).exists():
            return Applied(summary.id, None, None, already_applied=True)
        row = summary_create(summary, now=now)
        ordinal, item_id = context_range_replace(
            conversation_id=summary.conversation_id,
            planned_item_ids=planned_item_ids,
            summary=row,
            now=now,
        )
        if event is not None:
            compaction_event_record(event)
        if on_applied is not None:
            on_applied(row)
        held = _held_back.get()
        if held is not None:
            held.add(summary.conversation_id)
        elif _after_summary_hooks:
            transaction.on_commit(lambda: _run_after_summary_hooks(summary.conversation_id))
    return Applied(summary.id, ordinal, item_id, already_applied=False)
