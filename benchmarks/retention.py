"""Retention benchmark (docs/retention.md): a corpus of conversations archived down to their
newest messages; database size before and after (each after a VACUUM), archive size and
compression (zstd and gzip), archive and restore throughput, `expand` of a summary over 8
archived leaves (cold and warm read cache, against the same expand before archiving), grep
with and without archived ranges, and the round trip (every message byte-identical after
restore; an export identical before and after archiving).

Scale 1 is the issue's corpus: 10 conversations of 100,000 messages, each archived down to
its newest 20,000 (1,000,000 messages, 800,000 archived). Messages are ingested through the
real service; the summary DAG (a leaf per 10 messages, a condensed summary per 8 leaves) is
written in bulk, the way the engine leaves it, with the newest messages raw in the context.
"""

from __future__ import annotations

import secrets
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from archive import segments
from archive.models import Segment
from archive.selectors import forget, segment_forms
from benchmarks.conversations import bench_user, new_conversation, synthetic_payload
from benchmarks.harness import BenchContext, BenchRow, Timer, benchmark, p50
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
from core.tokens import estimate
from importers.exporters import export_jsonl
from retention.models import RetentionPolicy
from retention.services import retention_apply, retention_plan, retention_restore
from retrieval.grep import GrepRequest, grep_for_user
from retrieval.selectors import expand_for_user

LEAF = 10
FANOUT = 8


def _summary(conversation_id, kind, depth, label, now):
    content = f"{kind} summary at depth {depth} of {label}"
    return Summary(
        id=f"sum_{secrets.token_hex(8)}", conversation_id=conversation_id, kind=kind,
        depth=depth, content=content, token_count=estimate(content), earliest_at=now,
        latest_at=now + timedelta(seconds=1), created_at=now,
    )  # fmt: skip


def _build_dag(conversation_id: int, covered: int) -> list[str]:
    """Leaves over the first `covered` messages, condensed summaries of 8 leaves; the context
    becomes [condensed..., raw tail...]. Returns the condensed ids."""
    now = timezone.now()
    ids = list(
        Message.objects.filter(conversation_id=conversation_id)
        .order_by("seq")
        .values_list("id", flat=True)[:covered]
    )
    leaves, edges, parents, condensed = [], [], [], []
    for start in range(0, covered, LEAF):
        leaf = _summary(conversation_id, "leaf", 0, f"messages {start + 1}-{start + LEAF}", now)
        leaves.append(leaf)
        edges += [
            SummaryMessage(
                summary_id=leaf.id, message_id=m, conversation_id=conversation_id, ordinal=i
            )  # fmt: skip
            for i, m in enumerate(ids[start : start + LEAF])
        ]
    for i in range(0, len(leaves), FANOUT):
        node = _summary(conversation_id, "condensed", 1, f"leaves {i}-{i + FANOUT}", now)
        condensed.append(node)
        parents += [
            SummaryParent(
                summary_id=node.id,
                parent_summary_id=s.id,
                conversation_id=conversation_id,
                ordinal=k,
            )  # fmt: skip
            for k, s in enumerate(leaves[i : i + FANOUT])
        ]
    with transaction.atomic():
        Summary.objects.bulk_create(leaves + condensed, batch_size=2000)
        SummaryMessage.objects.bulk_create(edges, batch_size=5000)
        SummaryParent.objects.bulk_create(parents, batch_size=5000)
        ContextItem.objects.filter(conversation_id=conversation_id, message_id__in=ids).delete()
        ContextItem.objects.bulk_create(
            ContextItem(
                conversation_id=conversation_id,
                ordinal=-len(condensed) + i,
                item_type=ItemType.SUMMARY,
                summary_id=s.id,
                token_count=s.token_count,
            )  # fmt: skip
            for i, s in enumerate(condensed)
        )
    return [s.id for s in condensed]


def _db_bytes() -> int:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("VACUUM FULL")
            cursor.execute("SELECT pg_database_size(current_database())")
            return cursor.fetchone()[0]
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        cursor.execute("VACUUM")
        cursor.execute("PRAGMA page_count")
        pages = cursor.fetchone()[0]
        cursor.execute("PRAGMA page_size")
        return pages * cursor.fetchone()[0]


def _digests(conversation_ids) -> list[bytes]:
    """SHA-256 of every message's canonical form, read through the archive port."""
    from conversations.archive_port import hydrate_messages

    out = []
    for cid in conversation_ids:
        last = 0
        while True:
            batch = list(
                Message.objects.filter(conversation_id=cid, seq__gt=last)
                .prefetch_related("parts").order_by("seq")[:5000]
            )  # fmt: skip
            if not batch:
                break
            hydrate_messages(batch)
            out += [segments.form_sha256(segments.canonical_form(m, sorted(m.parts.all(), key=lambda p: p.ordinal)))
                    for m in batch]  # fmt: skip
            last = batch[-1].seq
    return out


def _expand_ms(user, summary_ids, *, cold: bool) -> float:
    samples = []
    for sid in summary_ids:
        if cold:
            forget()
        with Timer() as t:
            result = expand_for_user(user=user, summary_id=sid, depth=1, include_messages=True,
                                     token_cap=10**8)  # fmt: skip
        assert len(result.messages) == LEAF * FANOUT
        samples.append(t.seconds * 1000)
    return p50(samples)


def _grep_ms(user, conversation_id, *, include_archived: bool) -> tuple[float, int]:
    samples, hits = [], 0
    for word in ("stale", "deploy", "mocked"):
        request = GrepRequest(query=word, conversation_id=conversation_id, limit=50,
                              include_archived=include_archived)  # fmt: skip
        with Timer() as t:
            hits = len(grep_for_user(user=user, request=request))
        samples.append(t.seconds * 1000)
    return p50(samples), hits


@benchmark("retention")
def retention(ctx: BenchContext) -> list[BenchRow]:
    vendor = connection.vendor
    per_conversation, keep, count = ctx.n(100_000), ctx.n(20_000), 10
    keep -= keep % LEAF
    covered = ((per_conversation - keep) // (LEAF * FANOUT)) * LEAF * FANOUT
    user = bench_user()
    empty_bytes = _db_bytes()  # the schema and catalog of an empty database
    payloads = [parse_message(synthetic_payload(i)) for i in range(1000)]
    conversations, condensed = [], []
    for _ in range(count):
        conversation = new_conversation("retention")
        for start in range(0, per_conversation, 1000):
            messages_append(conversation_id=conversation.pk,
                            messages=payloads[: min(1000, per_conversation - start)])  # fmt: skip
        condensed.append(_build_dag(conversation.pk, covered))
        RetentionPolicy.objects.create(conversation=conversation, keep_newest_tokens=1)
        conversations.append(conversation)
    ids = [c.pk for c in conversations]
    before_bytes = _db_bytes()
    before_digests = _digests(ids)
    export_before = list(export_jsonl(conversations[0]))
    sample = condensed[0][: min(20, len(condensed[0]))]
    expand_before = _expand_ms(user, sample, cold=True)
    grep_before, hits_before = _grep_ms(user, ids[0], include_archived=False)

    with Timer() as archiving:
        result = retention_apply(ranges=retention_plan(conversations=conversations))
    assert result.messages == covered * count and result.conflicts == 0, result
    after_bytes = _db_bytes()
    archive_bytes = sum(Segment.objects.values_list("stored_bytes", flat=True))
    raw_bytes = sum(Segment.objects.values_list("raw_bytes", flat=True))
    gzip_ratio = []
    for segment in Segment.objects.order_by("pk")[:20]:
        payload = list(segment_forms(segment).values())
        data, raw = segments.encode({"messages": payload}, codec="gzip")
        zst, _ = segments.encode({"messages": payload}, codec="zstd")
        gzip_ratio.append((raw / len(data), raw / len(zst)))
    expand_cold = _expand_ms(user, sample, cold=True)
    expand_warm = _expand_ms(user, sample, cold=False)
    grep_without, hits_without = _grep_ms(user, ids[0], include_archived=False)
    grep_with, hits_with = _grep_ms(user, ids[0], include_archived=True)
    assert list(export_jsonl(conversations[0])) == export_before, "export differs after archiving"
    assert _digests(ids) == before_digests, "archived reads differ"

    with Timer() as restoring:
        restored = sum(retention_restore(conversation=c) for c in conversations)
    assert restored == result.messages
    assert _digests(ids) == before_digests, "restore is not byte-identical"

    ratio = after_bytes / before_bytes
    content_ratio = (after_bytes - empty_bytes) / max(1, before_bytes - empty_bytes)
    label = f"{count} conversations x {per_conversation:,} messages, newest {keep:,} kept"
    return [
        BenchRow(f"retention, database size after archiving, {vendor}", ratio * 100, "% of before",
                 "≤ 25%", f"{before_bytes / 2**20:,.1f} MiB -> {after_bytes / 2**20:,.1f} MiB "
                 f"(each after VACUUM{' FULL' if vendor == 'postgresql' else ''}); without the empty "
                 f"database's {empty_bytes / 2**20:,.1f} MiB: {content_ratio:.1%}; {label}"),
        BenchRow(f"retention, archive size, {vendor}", archive_bytes / 2**20, "MiB", "",
                 f"{result.segments} segments, zstd-{segments.ZSTD_LEVEL} "
                 f"{raw_bytes / max(1, archive_bytes):.1f}x; on 20 segments gzip-9 "
                 f"{p50([g for g, _ in gzip_ratio]):.1f}x vs zstd {p50([z for _, z in gzip_ratio]):.1f}x"),
        BenchRow(f"retention, archive throughput, {vendor}", result.messages / archiving.seconds,
                 "msg/s", "", f"{result.messages:,} messages write+fsync+read back+verify+clear"),
        BenchRow(f"retention, restore throughput, {vendor}", restored / restoring.seconds,
                 "msg/s", "", f"{restored:,} messages, each re-hashed after restore"),
        BenchRow(f"retention, expand of a summary over 8 archived leaves, {vendor}, p50 cold",
                 expand_cold, "ms", "< 50 ms",
                 f"80 messages; before archiving {expand_before:.1f} ms; warm cache "
                 f"{expand_warm:.1f} ms; {len(sample)} summaries"),
        BenchRow(f"retention, grep full text in one conversation, {vendor}, p50", grep_without,
                 "ms", "", f"before archiving {grep_before:.1f} ms ({hits_before} hits); after: "
                 f"{hits_without} hits without archived ranges, include_archived "
                 f"{grep_with:.1f} ms ({hits_with} hits, "
                 f"≤ {settings.LCM_GREP_ARCHIVE_SEGMENTS} segments)"),
        BenchRow(f"retention, round trip, {vendor}", float(len(before_digests)), "messages",
                 "all identical", "every message's canonical form after archive (read back) "
                 "and after restore hashes as before; export identical before/after"),
    ]  # fmt: skip
