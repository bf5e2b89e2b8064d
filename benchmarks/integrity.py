"""Integrity benchmark: a full scan of a 100,000-message conversation with its summaries.

The conversation is ingested through the real service; its DAG (a leaf per 10 messages,
a condensed summary per 10 below it, three levels) is written in bulk, the way the
engine would leave it, with the newest 1,000 messages still raw in the context.
"""

from __future__ import annotations

import secrets
from datetime import timedelta

from django.db import connection, transaction
from django.utils import timezone

# Registers the large-file rows too (`lcm_bench --only large_files`): the bench registry
# lists one module per app, and large files have no app of their own.
import benchmarks.largefiles  # noqa: F401
from benchmarks.conversations import new_conversation, synthetic_payload
from benchmarks.harness import BenchContext, BenchRow, Timer, benchmark
from conversations.inputs import parse_message
from conversations.models import (
    ContextItem,
    ItemType,
    Message,
    Summary,
    SummaryMessage,
    SummaryParent,
)
from conversations.services import messages_append
from core.token_estimate import estimate
from integrity.checks import CHECKS, Scope
from integrity.report import one_snapshot, scan

FANOUT = 10
RAW_TAIL = 1000


def _summary(conversation_id, kind, depth, first, last, now):
    content = f"{kind} summary at depth {depth} of messages {first}-{last}"
    return Summary(
        id=f"sum_{secrets.token_hex(8)}",
        conversation_id=conversation_id,
        kind=kind,
        depth=depth,
        content=content,
        token_count=estimate(content),
        earliest_at=now,
        latest_at=now + timedelta(seconds=1),
        created_at=now,
    )


def _build_dag(conversation_id: int, total: int) -> int:
    """Leaves over all but the raw tail, condensed levels above them; returns summaries."""
    now = timezone.now()
    ids = list(
        Message.objects.filter(conversation_id=conversation_id)
        .order_by("seq")
        .values_list("id", flat=True)
    )
    covered = ((total - RAW_TAIL) // FANOUT**3) * FANOUT**3
    with transaction.atomic():
        level = []
        edges = []
        for start in range(0, covered, FANOUT):
            leaf = _summary(conversation_id, "leaf", 0, start + 1, start + FANOUT, now)
            level.append((leaf, start + 1, start + FANOUT))
            edges += [
                SummaryMessage(
                    summary_id=leaf.id, message_id=m, conversation_id=conversation_id, ordinal=i
                )
                for i, m in enumerate(ids[start : start + FANOUT])
            ]
        made = [s for s, _, _ in level]
        Summary.objects.bulk_create(made, batch_size=2000)
        SummaryMessage.objects.bulk_create(edges, batch_size=5000)
        for depth in (1, 2):
            upper, parent_edges = [], []
            for i in range(0, len(level), FANOUT):
                group = level[i : i + FANOUT]
                node = _summary(conversation_id, "condensed", depth, group[0][1], group[-1][2], now)
                upper.append((node, group[0][1], group[-1][2]))
                parent_edges += [
                    SummaryParent(
                        summary_id=node.id,
                        parent_summary_id=s.id,
                        conversation_id=conversation_id,
                        ordinal=k,
                    )
                    for k, (s, _, _) in enumerate(group)
                ]
            Summary.objects.bulk_create([s for s, _, _ in upper], batch_size=2000)
            SummaryParent.objects.bulk_create(parent_edges, batch_size=5000)
            made += [s for s, _, _ in upper]
            level = upper
        ContextItem.objects.filter(
            conversation_id=conversation_id, message_id__in=ids[:covered]
        ).delete()
        # The top summaries take the ordinals the first messages had (1, 2, ...).
        ContextItem.objects.bulk_create(
            ContextItem(
                conversation_id=conversation_id,
                ordinal=i + 1,
                item_type=ItemType.SUMMARY,
                summary_id=s.id,
                token_count=s.token_count,
            )
            for i, (s, _, _) in enumerate(level)
        )
    return len(made)


@benchmark("integrity")
def integrity(ctx: BenchContext) -> list[BenchRow]:
    total = ctx.n(100_000)
    conversation = new_conversation("integrity")
    payloads = [parse_message(synthetic_payload(i)) for i in range(1000)]
    for _ in range(0, total, 1000):
        messages_append(conversation_id=conversation.pk, messages=payloads)
    summaries = _build_dag(conversation.pk, total)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    scope = Scope(conversation.pk)
    with Timer() as t:
        result = scan(scope)
    assert result.total_problems == 0, result.counts()
    target = "< 5 s" if connection.vendor == "postgresql" else ""
    rows = [
        BenchRow(
            f"integrity, full scan of one conversation, {connection.vendor}",
            t.seconds,
            "s",
            target,
            f"{total:,} messages, {summaries:,} summaries, {len(CHECKS)} checks, 0 problems",
        )
    ]
    slowest = []
    with one_snapshot():  # as in the scan: one snapshot, no JIT
        for check in CHECKS:
            with Timer() as one:
                check.detect(scope)
            slowest.append((one.seconds, check.name))
    slowest.sort(reverse=True)
    rows.append(
        BenchRow(
            "integrity, slowest checks of that scan",
            slowest[0][0],
            "s",
            "",
            ", ".join(f"{name} {seconds:.2f} s" for seconds, name in slowest[:4]),
        )
    )
    return rows
