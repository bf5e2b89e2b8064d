"""Semantic memory benchmarks (`lcm_bench --only memory`).

- recall@6 of search (memory.recall.search_units: full text, semantic, hybrid) and of a
  turn's retrieval (memory.turn_retrieval.turn_search, its filters as the LCM_RETRIEVAL_*
  settings say) on the recall fixture (5,000 messages, 200 planted facts, each asked by a
  question sharing no content word with it);
- indexing throughput of that conversation (chunk + embed + store) and raw embedding
  throughput;
- retrieval p50 with 100,000 chunks (hybrid pipeline, and the vector leg alone);
- resident memory of the embedding model (measured in a fresh process) and of the
  vector search cache for 100,000 chunks;
- indexing backlog under a burst of 1,000 ingests (queue depth, drain time).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import subprocess
import sys
import time

import numpy as np
from django.db import connection, transaction
from django.utils import timezone

from benchmarks import recall_fixture
from benchmarks.conversations import new_conversation
from benchmarks.harness import BenchContext, BenchRow, benchmark, p50, percentile
from conversations.inputs import MessageInput
from conversations.models import Conversation
from conversations.services import messages_append
from memory.chunker import extractive_summary
from memory.embeddings import active_backend
from memory.indexing import index_conversation_messages
from memory.models import Chunk, ChunkType, ChunkVector
from memory.namespaces import search_namespace
from memory.recall import search_units
from memory.turn_retrieval import turn_search
from memory.vectors import ScopeFilter, vector_index

TOP_K = 6
_LATENCY_RUNS = 100


def _write_fixture(ctx: BenchContext) -> tuple[Conversation, list, float, int]:
    total = max(500, ctx.n(5000))
    facts = max(20, ctx.n(200))
    rows, planted = recall_fixture.messages(total=total, facts=facts)
    conversation = new_conversation("memory-recall")
    base = timezone.now() - dt.timedelta(days=30)
    batch = 100
    for start in range(0, len(rows), batch):
        messages_append(
            conversation_id=conversation.pk,
            messages=[
                MessageInput(role=role, content=text, created_at=base + dt.timedelta(minutes=i))
                for i, (role, text) in enumerate(rows[start : start + batch], start=start)
            ],
        )
    started = time.perf_counter()
    index_conversation_messages(conversation_id=conversation.pk)
    seconds = time.perf_counter() - started
    return conversation, planted, seconds, len(rows)


def _recall(conversation: Conversation, planted: list, mode: str) -> tuple[float, list[float]]:
    """Share of the facts whose message is among the first TOP_K chunks; `mode` is a
    search mode, or "turn" for a turn's ranking (before packing)."""
    scope = ScopeFilter(conversations=((conversation.pk, None),))
    found, times = 0, []
    for fact in planted:
        started = time.perf_counter()
        if mode == "turn":
            items = turn_search(scope=scope, query=fact.question).items[:TOP_K]
            spans = [(i.provenance["seq_start"], i.provenance["seq_end"], i.text) for i in items]
        else:
            hits = search_units(scope=scope, query=fact.question, k=TOP_K, mode=mode).hits
            spans = [(h.chunk.seq_start, h.chunk.seq_end, h.chunk.rendered_text) for h in hits]
        times.append((time.perf_counter() - started) * 1000)
        if any(first <= fact.seq <= last and fact.fact in text for first, last, text in spans):
            found += 1
    return found / len(planted), times


def write_chunks(*, conversation_id, namespace, texts, first_seq, source_keys, rng, now) -> None:
    """One chunk per text (seq `first_seq` onwards) with a random unit vector, in bulk:
    search cost does not depend on the vectors' values."""
    vectors = rng.standard_normal((len(texts), namespace.dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    chunks = [
        Chunk(
            conversation_id=conversation_id,
            source_key=source_keys[i],
            seq_start=first_seq + i,
            seq_end=first_seq + i,
            start_offset=0,
            end_offset=len(text),
            chunk_type=ChunkType.OTHER,
            rendered_text=text,
            summary=extractive_summary(text),
            token_est=len(text) // 4,
            content_hash=hashlib.sha256(text.encode()).hexdigest(),
            source_created_at=now,
        )
        for i, text in enumerate(texts)
    ]
    with transaction.atomic():
        Chunk.objects.bulk_create(chunks, batch_size=1000)
        ChunkVector.objects.bulk_create(
            [
                ChunkVector(namespace_id=namespace.pk, chunk_id=c.pk, vector=v.tobytes())
                for c, v in zip(chunks, vectors.astype("<f4"), strict=True)
            ],
            batch_size=1000,
        )


def _bulk_chunks(conversation: Conversation, count: int) -> None:
    """`count` chunks of short synthetic text, written in bulk, with random unit vectors
    (search cost does not depend on the values; embedding 100,000 texts with the model
    would take most of an hour on this machine)."""
    namespace = search_namespace()
    rng = np.random.default_rng(11)
    now = timezone.now()
    topics = recall_fixture._FILLER_TOPICS
    words = [w for pair in recall_fixture.SYNONYMS for w in pair]
    batch = 5000
    for start in range(0, count, batch):
        texts = [
            f"{topics[i % len(topics)]} Item {i} mentions the {words[i % len(words)]} "
            f"and the {words[(i * 7) % len(words)]}."
            for i in range(start, min(count, start + batch))
        ]
        write_chunks(
            conversation_id=conversation.pk,
            namespace=namespace,
            texts=texts,
            first_seq=start + 1,
            source_keys=[f"bench:{conversation.pk}:{start + i}" for i in range(len(texts))],
            rng=rng,
            now=now,
        )


def _model_rss_mb() -> float:
    """Resident memory the embedding model adds to a fresh Python process."""
    code = "\n".join(
        [
            "import os, django",
            "os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'lcmsite.settings')",
            "django.setup()",
            "def rss():",
            "    pages = int(open('/proc/self/statm').read().split()[1])",
            "    return pages * os.sysconf('SC_PAGE_SIZE')",
            "from memory.embeddings import active_backend",
            "backend = active_backend()",
            "before = rss()",
            "backend.embed(['warm up the model'])",
            "print(rss() - before)",
        ]
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    )
    return int(out.stdout.strip().splitlines()[-1]) / 1e6


class _Rows(list):
    """Rows, each also written to stderr when added (a long run shows its progress)."""

    def append(self, row: BenchRow) -> None:
        super().append(row)
        print(f"  {row.name}: {row.figure:,.3f} {row.unit} ({row.detail})", file=sys.stderr)


@benchmark("memory")
def memory(ctx: BenchContext) -> list[BenchRow]:
    """recall, latency and burst; MEMORY_BENCH_PARTS=latency,burst (say) runs only those."""
    parts = os.environ.get("MEMORY_BENCH_PARTS", "recall,latency,burst").split(",")
    rows: list[BenchRow] = []
    for name, part in (
        ("recall", memory_recall),
        ("latency", memory_latency),
        ("burst", memory_burst),
    ):
        if name in parts:
            rows.extend(part(ctx))
    return rows


def memory_recall(ctx: BenchContext) -> list[BenchRow]:
    rows: list[BenchRow] = _Rows()
    vendor = connection.vendor
    backend = active_backend()
    conversation, planted, index_seconds, message_count = _write_fixture(ctx)
    chunks = Chunk.objects.filter(conversation=conversation).count()
    rows.append(
        BenchRow(
            f"memory: index {message_count:,} messages ({vendor})",
            message_count / index_seconds,
            "messages/s",
            "",
            f"{chunks:,} chunks in {index_seconds:.1f} s ({chunks / index_seconds:,.0f} chunks/s), "
            f"model {backend.name}",
        )
    )
    for mode in ("full_text", "semantic", "hybrid", "turn"):
        recall, times = _recall(conversation, planted, mode)
        rows.append(
            BenchRow(
                f"memory: recall@{TOP_K} {mode} ({len(planted)} facts, {vendor})",
                recall,
                "recall",
                ">= 0.8, > full text" if mode == "turn" else "",
                f"p50 {p50(times):.1f} ms per query",
            )
        )
    ctx.notes.append(
        "memory: recall fixture from benchmarks/recall_fixture.py; hit = a returned chunk holds "
        "the planted fact's message; full_text/semantic/hybrid: search_units (grep's ranking); "
        "turn: a turn's ranking (search_units + its recency bonus and threshold)"
    )
    return rows


def memory_latency(ctx: BenchContext) -> list[BenchRow]:
    rows: list[BenchRow] = _Rows()
    vendor = connection.vendor
    backend = active_backend()
    questions = [f.question for f in recall_fixture.planted_facts(200)]
    texts = [" ".join(recall_fixture._FILLER_TOPICS) * 3 + f" {i}" for i in range(100)]
    started = time.perf_counter()
    backend.embed(texts)
    seconds = time.perf_counter() - started
    tokens = sum(len(t) for t in texts) // 4
    rows.append(
        BenchRow(
            "memory: embedding throughput",
            len(texts) / seconds,
            "chunks/s",
            "",
            f"~{tokens // len(texts)}-token chunks, {backend.name}, one process",
        )
    )
    # -- latency with 100k chunks ---------------------------------------------------
    target = max(1000, ctx.n(100_000))
    big = new_conversation("memory-latency")
    started = time.perf_counter()
    _bulk_chunks(big, target)
    if vendor == "postgresql":  # planner statistics, as autovacuum would gather after a load
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE memory_chunk")
            cursor.execute("ANALYZE memory_chunkvector")
    load_seconds = time.perf_counter() - started
    scope = ScopeFilter(conversations=((big.pk, None),))
    index = vector_index()
    namespace = search_namespace()
    started = time.perf_counter()
    index.search(
        namespace_id=namespace.pk,
        query=backend.embed(["warm"])[0],
        scope=scope,
        k=16,
        dim=namespace.dim,
    )
    first_ms = (time.perf_counter() - started) * 1000
    # Cold: each query is new (its embedding is computed); warm: the same queries again
    # (the query-vector LRU answers). The legs are timed on their own as well.
    from memory.embeddings import clear_query_cache, embed_query
    from memory.fulltext import search_chunks

    clear_query_cache()
    embed_times, vector_times, text_times, cold_times, warm_times = [], [], [], [], []
    runs = [questions[i % len(questions)] for i in range(_LATENCY_RUNS)]
    for query in runs:
        started = time.perf_counter()
        turn_search(scope=scope, query=query)
        cold_times.append((time.perf_counter() - started) * 1000)
    for query in runs:
        started = time.perf_counter()
        turn_search(scope=scope, query=query)
        warm_times.append((time.perf_counter() - started) * 1000)
        vector = embed_query(backend, query)
        started = time.perf_counter()
        index.search(namespace_id=namespace.pk, query=vector, scope=scope, k=16, dim=namespace.dim)
        vector_times.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        search_chunks(query=query, scope=scope, k=16)
        text_times.append((time.perf_counter() - started) * 1000)
    clear_query_cache()
    for query in runs:
        started = time.perf_counter()
        embed_query(backend, query)
        embed_times.append((time.perf_counter() - started) * 1000)
    load = f"load average {os.getloadavg()[0]:.1f}"
    rows.append(
        BenchRow(
            f"memory: vector search p50, {target:,} chunks ({vendor}, {index.name})",
            p50(vector_times),
            "ms",
            "< 50 ms",
            f"p99 {percentile(vector_times, 0.99):.1f} ms; first search (cache fill) "
            f"{first_ms:,.0f} ms; load {load_seconds:.0f} s",
        )
    )
    rows.append(
        BenchRow(
            f"memory: full-text leg p50, {target:,} chunks ({vendor})",
            p50(text_times),
            "ms",
            "",
            f"p99 {percentile(text_times, 0.99):.1f} ms",
        )
    )
    rows.append(
        BenchRow(
            "memory: query embedding p50",
            p50(embed_times),
            "ms",
            "",
            f"p99 {percentile(embed_times, 0.99):.1f} ms; {backend.name}, one short question",
        )
    )
    rows.append(
        BenchRow(
            f"memory: turn retrieval p50, new queries, {target:,} chunks ({vendor})",
            p50(cold_times),
            "ms",
            "< 50 ms (SRD: < 500 ms)",
            f"p99 {percentile(cold_times, 0.99):.1f} ms; search_units (embed query, BM25, "
            f"cosine, fusion) + the turn's filters; {load}",
        )
    )
    rows.append(
        BenchRow(
            f"memory: turn retrieval p50, repeated queries, {target:,} chunks ({vendor})",
            p50(warm_times),
            "ms",
            "< 50 ms",
            f"p99 {percentile(warm_times, 0.99):.1f} ms; query vector from the LRU; {load}",
        )
    )
    if vendor == "sqlite":
        from memory.vectors import VectorIndexUnavailable
        from memory.vectors.sqlite_vec import SqliteVecIndex

        sqlite_vec_index = SqliteVecIndex()
        times = []
        try:
            for i in range(10):
                vector = backend.embed([questions[i % len(questions)]])[0]
                started = time.perf_counter()
                sqlite_vec_index.search(namespace_id=namespace.pk, query=vector, scope=scope, k=16)
                times.append((time.perf_counter() - started) * 1000)
        except VectorIndexUnavailable as error:
            ctx.notes.append(f"memory: sqlite-vec not measured: {error}")
        if times:
            rows.append(
                BenchRow(
                    f"memory: sqlite-vec exact scan p50, {target:,} chunks",
                    p50(times),
                    "ms",
                    "",
                    "LCM_VECTOR_INDEX=sqlite_vec (scan inside SQLite)",
                )
            )
    # -- resident memory ------------------------------------------------------------
    from memory.vectors.numpy_exact import INDEX

    cache_bytes = sum(
        m.vectors.nbytes
        + m.conversations.nbytes
        + m.seq_end.nbytes
        + m.owners.nbytes
        + sum(sys.getsizeof(c) for c in m.chunk_ids)
        + sys.getsizeof(m.chunk_ids)
        for m in INDEX._matrices.values()
    )
    rows.append(
        BenchRow(
            "memory: resident memory of the embedding model",
            _model_rss_mb(),
            "MB",
            "< 300 MB",
            f"{backend.name}, RSS growth of a fresh process on first use",
        )
    )
    rows.append(
        BenchRow(
            f"memory: vector search cache, {Chunk.objects.count():,} chunks",
            cache_bytes / 1e6,
            "MB",
            "< 200 MB per 100k",
            "float32 matrix + row metadata (numpy index)",
        )
    )
    return rows


def memory_burst(ctx: BenchContext) -> list[BenchRow]:
    rows: list[BenchRow] = _Rows()
    for row in _burst(ctx):
        rows.append(row)
    return rows


def _burst(ctx: BenchContext) -> list[BenchRow]:
    """1,000 turns (a user and an assistant message each, each in its own conversation)
    arrive as fast as one client can send them, while one worker thread drains the
    indexing queue as the ingest hook fills it. Reports how the ingests fared meanwhile
    (never waiting for indexing), the backlog's peak, and when it drained."""
    import queue
    import threading

    count = max(50, ctx.n(1000))
    jobs: queue.Queue = queue.Queue()
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            while (conversation_id := jobs.get()) is not None:
                index_conversation_messages(conversation_id=conversation_id)
        except BaseException as error:  # noqa: BLE001 - reported in the row
            errors.append(error)
        finally:
            connection.close()

    thread = threading.Thread(target=worker, name="memory-burst-worker")
    thread.start()
    ingest_times, peak = [], 0
    started = time.perf_counter()
    for i in range(count):
        conversation = new_conversation(f"memory-burst-{i}")
        begun = time.perf_counter()
        messages_append(
            conversation_id=conversation.pk,
            messages=[
                MessageInput(role="user", content=f"Question {i}: how do I rotate the API keys?"),
                MessageInput(
                    role="assistant",
                    content=f"Answer {i}: rotate them in the vault, then restart the workers "
                    "so they read the new keys; old keys stay valid for one hour.",
                ),
            ],
        )
        ingest_times.append((time.perf_counter() - begun) * 1000)
        jobs.put(conversation.pk)
        peak = max(peak, jobs.qsize())
    burst_end = time.perf_counter()
    left = jobs.qsize()
    jobs.put(None)
    thread.join()
    drained = time.perf_counter()
    if errors:
        raise errors[0]
    load = f"load average {os.getloadavg()[0]:.1f}"
    return [
        BenchRow(
            f"memory: ingest p50 during a burst of {count:,} turns",
            p50(ingest_times),
            "ms",
            "",
            f"p99 {percentile(ingest_times, 0.99):.1f} ms; one client, "
            f"{count / (burst_end - started):.1f} turns/s, indexing running alongside",
        ),
        BenchRow(
            f"memory: indexing backlog drained after a burst of {count:,} turns",
            drained - burst_end,
            "s",
            "",
            f"backlog peaked at {peak:,} jobs, {left:,} left when the burst ended; "
            f"all {count:,} indexed {drained - started:.1f} s after it began "
            f"({count / (drained - started):.1f} jobs/s, one worker); {load}",
        ),
    ]
