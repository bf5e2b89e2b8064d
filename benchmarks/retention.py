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

Two corpora, each measured in turn: `synthetic` (short agent turns, ~250 characters of text
and a small tool part) and `agent` (the reference workload's 4-message cycle,
benchmarks/reference_workload.py, with tool outputs of 2-6 KB as real agents read files and
run tests). Both with the semantic memory on, as a deployment with memory has it: one memory
unit per message (its text, a copy of the message, as the chunker's units are) with a vector
in the search namespace's dimension (random unit vectors, written in bulk: embedding a
million texts would take hours, and size does not depend on the values), and its full-text
row. After archiving, the database is measured under each memory policy option in turn:
(vectors, full text) = (keep, keep), (keep, drop), (float16, drop), (int8, drop), (int8,
archive) (vectors are only ever made smaller, so the order is fixed); under `archive` the
units' text moves to the archive too, and a semantic search whose hits are archived units
is timed with their text read back from there. Every unit's text and summary, as readers
see them, is checked after the options and after restore.
"""

from __future__ import annotations

import hashlib
import random
import secrets
from datetime import timedelta

import numpy as np
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from archive import segments
from archive.models import Segment
from archive.selectors import forget, segment_forms
from benchmarks import reference_workload
from benchmarks.conversations import bench_user, new_conversation, synthetic_payload
from benchmarks.harness import BenchContext, BenchRow, Timer, benchmark, p50
from benchmarks.memory import write_chunks
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
from importers.exporters import export_jsonl
from memory.archived_content_policy import archived_chunks
from memory.archived_unit_text import hydrate_chunks
from memory.models import Chunk
from memory.namespaces import search_namespace
from memory.recall import search_units
from memory.vectors import ScopeFilter
from memory.vectors.numpy_exact import INDEX
from retention.models import RetentionPolicy
from retention.services import (
    retention_apply,
    retention_memory_apply,
    retention_plan,
    retention_restore,
    retention_status,
)
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


MEMORY_OPTIONS = (
    ("keep", "keep"), ("keep", "drop"), ("float16", "drop"), ("int8", "drop"), ("int8", "archive"),
)  # fmt: skip


def _unit_digests(conversation_ids) -> dict[str, bytes]:
    """Every memory unit's text and summary as its readers see them (memory.archived_unit_text)."""
    found = {}
    for cid in conversation_ids:
        last = ""
        while True:
            batch = list(
                Chunk.objects.filter(conversation_id=cid, pk__gt=last).order_by("pk")[:5000]
            )
            if not batch:
                break
            for chunk in hydrate_chunks(batch):
                found[chunk.pk] = hashlib.sha256(
                    f"{chunk.rendered_text}\0{chunk.summary}".encode()
                ).digest()
            last = batch[-1].pk
    return found


def _unit_search_ms(conversation_id: int) -> tuple[float, float]:
    """p50 of a semantic unit search (10 hits) in one conversation: cold archive read cache,
    then warm."""
    scope = ScopeFilter(conversations=((conversation_id, None),))
    search_units(scope=scope, query="warm up", k=1, mode="semantic")  # the model's first load
    cold, warm = [], []
    for query in ("why did the build fail", "what did we deploy", "which tests were mocked"):
        for samples in (cold, warm):
            if samples is cold:
                forget()
            with Timer() as t:
                search_units(scope=scope, query=query, k=10, mode="semantic")
            samples.append(t.seconds * 1000)
    return p50(cold), p50(warm)


def _agent_payloads(start: int, n: int) -> list[dict]:
    """Messages start .. start + n - 1 of the reference workload, each tool result grown to
    2-6 KB of file or test output (deterministic by index)."""
    payloads = reference_workload.reference_payloads(n, seed=0, start=start)
    code = reference_workload._CODE
    for index, payload in enumerate(payloads, start=start):
        if payload["role"] != "tool":
            continue
        rng = random.Random(f"agent-output:{index}")
        lines, size, target = [], 0, rng.randint(2048, 6144)
        while size < target:
            j = len(lines)
            line = code[(index + j * 5 + rng.randrange(len(code))) % len(code)].format(
                name=f"handler_{index % 89}_{j}", cls=f"Store{index % 13}", n=index * 31 + j,
                lo=j, hi=j + index % 50,
            )  # fmt: skip
            lines.append(f"{j + 1:4d}  {line}")
            size += len(lines[-1]) + 1
        output = payload["content"] + "\n" + "\n".join(lines)
        payload["content"] = output
        payload["parts"][0]["tool_output"] = output
    return payloads


def _append_corpus(conversation_id: int, corpus: str, count: int) -> None:
    synthetic = (
        [parse_message(synthetic_payload(i)) for i in range(1000)]
        if corpus == "synthetic"
        else None
    )
    for start in range(0, count, 1000):
        size = min(1000, count - start)
        batch = (
            synthetic[:size]
            if synthetic
            else [parse_message(p) for p in _agent_payloads(start, size)]
        )
        messages_append(conversation_id=conversation_id, messages=batch)


def _index_memory(conversation_id: int, namespace, rng) -> int:
    """One memory unit per message: its text, with a random unit vector (see the module doc)."""
    now = timezone.now()
    rows = list(Message.objects.filter(conversation_id=conversation_id).order_by("seq")
                .values_list("seq", "content"))  # fmt: skip
    for at in range(0, len(rows), 5000):
        batch = rows[at : at + 5000]
        write_chunks(
            conversation_id=conversation_id, namespace=namespace,
            texts=[text or "(no text)" for _, text in batch], first_seq=batch[0][0],
            source_keys=[f"msg:{conversation_id}:{seq}-{seq}" for seq, _ in batch],
            rng=rng, now=now,
        )  # fmt: skip
    return len(rows)


def _cache_fill_ms(namespace) -> float:
    INDEX.reset()
    with Timer() as t:
        INDEX.matrix(namespace_id=namespace.pk, dim=namespace.dim)
    return t.seconds * 1000


@benchmark("retention")
def retention(ctx: BenchContext) -> list[BenchRow]:
    """The synthetic corpus. Run each corpus in a database of its own (sizes are of the
    whole database): `lcm_bench --only retention` and `--only retention_agent`."""
    return _retention_corpus(ctx, "synthetic")


@benchmark("retention_agent")
def retention_agent(ctx: BenchContext) -> list[BenchRow]:
    """The agent corpus (tool outputs of 2-6 KB)."""
    return _retention_corpus(ctx, "agent")


def _memory_bytes() -> int | None:
    """Bytes of the memory tables and their indexes (SQLite: None without dbstat)."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT SUM(pg_total_relation_size(c.oid)) FROM pg_class c "
                "WHERE c.relkind = 'r' AND c.relname IN ('memory_chunk', 'memory_chunkvector')"
            )
            return int(cursor.fetchone()[0] or 0)
        try:
            cursor.execute(
                "SELECT SUM(pgsize) FROM dbstat WHERE name IN (SELECT name FROM sqlite_master "
                "WHERE tbl_name LIKE 'memory_chunk%') OR name LIKE 'memory_chunk_fts%'"
            )
        except Exception:  # noqa: BLE001 - SQLite built without dbstat
            return None
        return int(cursor.fetchone()[0] or 0)


def _mib(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB"


def _retention_corpus(ctx: BenchContext, corpus: str) -> list[BenchRow]:
    vendor = connection.vendor
    per_conversation, keep, count = ctx.n(100_000), ctx.n(20_000), 10
    keep -= keep % LEAF
    covered = ((per_conversation - keep) // (LEAF * FANOUT)) * LEAF * FANOUT
    user = bench_user()
    empty_bytes = _db_bytes()  # the database before this corpus (schema, earlier corpora)
    namespace = search_namespace()
    rng = np.random.default_rng(5)
    conversations, condensed = [], []
    for _ in range(count):
        conversation = new_conversation(f"retention-{corpus}")
        _append_corpus(conversation.pk, corpus, per_conversation)
        condensed.append(_build_dag(conversation.pk, covered))
        RetentionPolicy.objects.create(conversation=conversation, keep_newest_tokens=1)
        conversations.append(conversation)
    ids = [c.pk for c in conversations]
    messages_only = _db_bytes()
    units = sum(_index_memory(cid, namespace, rng) for cid in ids)
    before_bytes = _db_bytes()
    fill_before = _cache_fill_ms(namespace)
    search_before, _ = _unit_search_ms(ids[0])
    before_digests = _digests(ids)
    units_before = _unit_digests(ids)
    export_before = list(export_jsonl(conversations[0]))
    sample = condensed[0][: min(20, len(condensed[0]))]
    expand_before = _expand_ms(user, sample, cold=True)
    grep_before, hits_before = _grep_ms(user, ids[0], include_archived=False)

    with Timer() as archiving:
        result = retention_apply(ranges=retention_plan(conversations=conversations))
    assert result.messages == covered * count and result.conflicts == 0, result
    after_bytes = _db_bytes()
    memory_after = _memory_bytes()
    after_memory_less = after_bytes - memory_after if memory_after is not None else None
    segs = Segment.objects.filter(conversation_id__in=ids)
    archive_bytes = sum(segs.values_list("stored_bytes", flat=True))
    raw_bytes = sum(segs.values_list("raw_bytes", flat=True))
    gzip_ratio = []
    for segment in segs.order_by("pk")[:20]:
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

    # The memory policy options, in the only order they can be applied (module doc).
    text_bytes = sum(
        len(t)
        for cid in ids
        for t in archived_chunks(conversation_id=cid).values_list("rendered_text", flat=True)
    )
    archived_units = sum(archived_chunks(conversation_id=cid).count() for cid in ids)
    sizes = {("keep", "keep"): after_bytes}
    memory_seconds = {}
    for vectors, fulltext in MEMORY_OPTIONS[1:]:
        RetentionPolicy.objects.filter(conversation_id__in=ids).update(
            archived_vectors=vectors, archived_fulltext=fulltext
        )
        with Timer() as t:
            retention_memory_apply(conversations=conversations)
        memory_seconds[(vectors, fulltext)] = t.seconds
        sizes[(vectors, fulltext)] = _db_bytes()
    status = retention_status(conversations=conversations)
    assert status["memory_compressed_vectors"] == archived_units, status
    text_archived = status["memory_text_archived_chunks"]
    fill_int8 = _cache_fill_ms(namespace)
    search_cold, search_warm = _unit_search_ms(ids[0])
    assert _unit_digests(ids) == units_before, "a unit's text read back from the archive differs"

    with Timer() as restoring:
        restored = sum(retention_restore(conversation=c) for c in conversations)
    assert restored == result.messages
    assert _digests(ids) == before_digests, "restore is not byte-identical"
    status = retention_status(conversations=conversations)
    assert (status["memory_compressed_vectors"], status["memory_fulltext_dropped_chunks"],
            status["memory_text_archived_chunks"]) == (0, 0, 0), status  # fmt: skip
    assert _unit_digests(ids) == units_before, "a unit's text differs after restore"

    without_memory = (
        f"; without the memory tables {(after_memory_less / messages_only):.1%} of the "
        f"database before memory ({_mib(after_memory_less)} of {_mib(messages_only)})"
        if after_memory_less is not None
        else ""
    )
    label = (f"{corpus} corpus: {count} conversations x {per_conversation:,} messages, newest "
             f"{keep:,} kept; {units:,} memory units")  # fmt: skip
    vacuum = f"each after VACUUM{' FULL' if vendor == 'postgresql' else ''}"
    name = f"retention, {corpus}"
    option_rows = [
        BenchRow(f"{name}, database size, memory vectors {v} / full text {f}, {vendor}",
                 sizes[(v, f)] / before_bytes * 100, "% of before", "≤ 25%",
                 f"{_mib(before_bytes)} -> {_mib(sizes[(v, f)])}"
                 + (without_memory if (v, f) == ("keep", "keep") else "")
                 + (f"; policy step {memory_seconds[(v, f)]:.1f} s" if (v, f) in memory_seconds else ""))
        for v, f in MEMORY_OPTIONS
    ]  # fmt: skip
    return [
        BenchRow(f"{name}, database size before, {vendor}", before_bytes / 2**20, "MiB", "",
                 f"{_mib(messages_only - empty_bytes)} messages, summaries and indexes + "
                 f"{_mib(before_bytes - messages_only)} memory (units, vectors, full text); "
                 f"database before the corpus {_mib(empty_bytes)}; {label}; {vacuum}"),
        *option_rows,
        BenchRow(f"{name}, rendered text of archived memory units, {vendor}", text_bytes / 2**20,
                 "MiB", "", f"{archived_units:,} units; {text_archived:,} of them moved to the "
                 "archive under full text 'archive' (the rest are not given back exactly)"),
        BenchRow(f"{name}, semantic unit search in one conversation, {vendor}, p50 cold",
                 search_cold, "ms", "", f"10 hits, most of them archived units whose text is "
                 f"in the archive; warm archive cache {search_warm:.1f} ms; before archiving "
                 f"{search_before:.1f} ms"),
        BenchRow(f"{name}, vector cache fill, {vendor}", fill_int8, "ms", "",
                 f"{units:,} vectors, {archived_units:,} of them int8 (decoded per row); "
                 f"all float32: {fill_before:.0f} ms"),
        BenchRow(f"{name}, archive size, {vendor}", archive_bytes / 2**20, "MiB", "",
                 f"{result.segments} segments, zstd-{segments.ZSTD_LEVEL} "
                 f"{raw_bytes / max(1, archive_bytes):.1f}x; on 20 segments gzip-9 "
                 f"{p50([g for g, _ in gzip_ratio]):.1f}x vs zstd {p50([z for _, z in gzip_ratio]):.1f}x"),
        BenchRow(f"{name}, archive throughput, {vendor}", result.messages / archiving.seconds,
                 "msg/s", "", f"{result.messages:,} messages write+fsync+read back+verify+clear"),
        BenchRow(f"{name}, restore throughput, {vendor}", restored / restoring.seconds,
                 "msg/s", "", f"{restored:,} messages, each re-hashed after restore, and their "
                 "memory units' text, full-text rows and float32 vectors"),
        BenchRow(f"{name}, expand of a summary over 8 archived leaves, {vendor}, p50 cold",
                 expand_cold, "ms", "< 50 ms",
                 f"80 messages; before archiving {expand_before:.1f} ms; warm cache "
                 f"{expand_warm:.1f} ms; {len(sample)} summaries"),
        BenchRow(f"{name}, grep full text in one conversation, {vendor}, p50", grep_without,
                 "ms", "", f"before archiving {grep_before:.1f} ms ({hits_before} hits); after: "
                 f"{hits_without} hits without archived ranges, include_archived "
                 f"{grep_with:.1f} ms ({hits_with} hits, "
                 f"≤ {settings.LCM_GREP_ARCHIVE_SEGMENTS} segments)"),
        BenchRow(f"{name}, round trip, {vendor}", float(len(before_digests)), "messages",
                 "all identical", "every message's canonical form after archive (read back) "
                 "and after restore hashes as before; export identical before/after"),
    ]  # fmt: skip
