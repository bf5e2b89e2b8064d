"""Search latency at scale and the unit cache's memory (`lcm_bench --only recall_search`).

A conversation of 100,000 messages (scale 1) goes in through `messages_append`; its units
(one per message, the texts being short) are written in bulk with random unit vectors
(the cost of a search does not depend on the vectors' values, and embedding 100,000 texts
with the bundled model takes most of an hour on this machine). Then:

- hybrid grep p50/p95 through `grep_for_user` (what POST /api/v1/grep/ runs), new
  questions (their embedding included) and repeated ones (the query-vector LRU answers);
  beside it, in the same run, the single-message BM25 baseline of `lcm_eval` over the
  same messages (pure Python, the "50 lines a user could write");
- search_units alone (the ranking without grep's request and rows);
- the cache fill (first search) and the resident size of the unit cache per row (its
  storage, LCM_VECTOR_CACHE_DTYPE), and that size extrapolated to 1,000,000 units with
  float32 and int16 vectors;
- indexing throughput: messages chunked, embedded with the active model and stored per
  second (`index_conversation_messages`, short recall-fixture messages).
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np
from django.db import connection
from django.utils import timezone

from benchmarks import recall_fixture
from benchmarks.conversations import new_conversation
from benchmarks.harness import BenchContext, BenchRow, benchmark, p50, percentile
from benchmarks.memory import write_chunks
from benchmarks.recall_eval import SingleMessageBM25
from conversations.inputs import MessageInput
from conversations.models import Message
from conversations.services import messages_append
from memory.namespaces import search_namespace
from memory.recall import search_units
from memory.vectors.base import ScopeFilter
from memory.vectors.numpy_exact import INDEX

RUNS = 60
INDEXED = 400  # messages indexed with the model for the throughput row


def _texts(count: int) -> list[str]:
    topics = recall_fixture._FILLER_TOPICS
    words = [w for pair in recall_fixture.SYNONYMS for w in pair]
    return [
        f"{topics[i % len(topics)]} Item {i} mentions the {words[i % len(words)]} "
        f"and the {words[(i * 7) % len(words)]}."
        for i in range(count)
    ]


def _load(conversation, texts: list[str]) -> None:
    namespace = search_namespace()
    rng = np.random.default_rng(7)
    now = timezone.now()
    batch = 5000
    for start in range(0, len(texts), batch):
        part = texts[start : start + batch]
        messages_append(
            conversation_id=conversation.pk,
            messages=[MessageInput(role="user", content=t) for t in part],
        )
        write_chunks(
            conversation_id=conversation.pk,
            namespace=namespace,
            texts=part,
            first_seq=start + 1,
            source_keys=[
                f"msg:{conversation.pk}:{start + i + 1}-{start + i + 1}" for i in range(len(part))
            ],
            rng=rng,
            now=now,
        )


def _matrix_bytes(matrix) -> tuple[int, int]:
    """(vector bytes, everything else) the unit cache holds for its rows, counted from its
    arrays (their used rows), strings and dicts."""
    n = matrix.count
    vectors = n * matrix.dim * matrix.vectors.itemsize + n * matrix.scales.itemsize * (
        matrix.scales.size > 0
    )
    per_row = (
        matrix.conversations,
        matrix.seq_end,
        matrix.owners,
        matrix.seq_start,
        matrix.doclen,
        matrix.speakers,
    )
    other = n * sum(a.itemsize for a in per_row)
    other += sys.getsizeof(matrix.chunk_ids) + sum(sys.getsizeof(i) for i in matrix.chunk_ids)
    inverted = matrix.inverted  # the BM25 postings (memory.inverted_index)
    other += sum(a.nbytes for s in inverted.segments for a in (s.terms, s.bounds, s.rows, s.tfs))
    other += sys.getsizeof(inverted.vocabulary) + sum(sys.getsizeof(t) for t in inverted.vocabulary)
    other += 16 * n  # each unit's neighbours (two int64 rows), kept after the first search
    for rows, local, extra in matrix._scopes.values():  # the scopes searched last
        kept = (*extra.get("neighbours", ()), *extra.get("neighbour_reads", ()))
        other += rows.nbytes + local.nbytes + sum(a.nbytes for a in kept)
    return vectors, other


def _indexing_rate(count: int) -> tuple[float, int]:
    """Messages indexed per second (chunk, embed with the active model, store) over
    `count` short messages written through `messages_append`; and the units made."""
    from memory.indexing import index_conversation_messages

    conversation = new_conversation("recall-index")
    texts, _ = recall_fixture.messages(total=count, facts=min(200, count // 4))
    messages_append(
        conversation_id=conversation.pk,
        messages=[MessageInput(role=role, content=text) for role, text in texts],
    )
    started = time.perf_counter()
    result = index_conversation_messages(conversation_id=conversation.pk)
    return len(texts) / (time.perf_counter() - started), result.chunks_created


@benchmark("recall_search")
def recall_search(ctx: BenchContext) -> list[BenchRow]:
    from django.contrib.auth import get_user_model

    from memory.embeddings import active_backend
    from retrieval.grep import GrepRequest, grep_for_user

    vendor = connection.vendor
    count = max(1000, ctx.n(100_000))
    texts = _texts(count)
    conversation = new_conversation("recall-search")
    started = time.perf_counter()
    _load(conversation, texts)
    load_seconds = time.perf_counter() - started
    if vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE memory_chunk")
            cursor.execute("ANALYZE memory_chunkvector")
    user = get_user_model().objects.get(pk=conversation.owner_id)
    questions = [f.question for f in recall_fixture.planted_facts(RUNS)]
    namespace = search_namespace()
    started = time.perf_counter()
    matrix = INDEX.matrix(namespace_id=namespace.pk, dim=namespace.dim)
    fill_ms = (time.perf_counter() - started) * 1000

    cpu_ms: dict[str, list[float]] = {"hybrid": [], "semantic": []}

    def ask(query: str, mode: str = "hybrid") -> float:
        request = GrepRequest(
            query=query,
            mode=mode,
            scope="messages",
            conversation_id=conversation.pk,
            limit=50,
            sort="relevance",
        )
        began, cpu = time.perf_counter(), time.process_time()
        grep_for_user(user=user, request=request)
        cpu_ms[mode].append((time.process_time() - cpu) * 1000)
        return (time.perf_counter() - began) * 1000

    ask("warm up")
    load_before = os.getloadavg()[0]
    cpu_ms["hybrid"].clear()
    cold = [ask(q) for q in questions]
    cold_cpu = p50(cpu_ms["hybrid"])
    cpu_ms["hybrid"].clear()
    warm = [ask(q) for q in questions]
    warm_cpu = p50(cpu_ms["hybrid"])
    semantic = [ask(q, "semantic") for q in questions]
    scope = ScopeFilter(conversations=((conversation.pk, None),))
    alone = []
    for q in questions:
        began = time.perf_counter()
        search_units(scope=scope, query=q, k=50)
        alone.append((time.perf_counter() - began) * 1000)
    load = f"load average {load_before:.1f}-{os.getloadavg()[0]:.1f}"
    stored = list(
        Message.objects.filter(conversation=conversation).order_by("seq").values_list("content")
    )
    started = time.perf_counter()
    baseline = SingleMessageBM25([c for (c,) in stored])
    build_ms = (time.perf_counter() - started) * 1000
    base_times = []
    for q in questions[:10]:
        began = time.perf_counter()
        baseline.rank(q)
        base_times.append((time.perf_counter() - began) * 1000)
    vector_bytes, other_bytes = _matrix_bytes(matrix)
    units = max(1, matrix.count)
    per_row = (vector_bytes + other_bytes) / units
    other_per_row = other_bytes / units
    index_rate, index_units = _indexing_rate(INDEXED)
    index_load = f"load average {os.getloadavg()[0]:.1f}"
    million = 1_000_000
    dim = namespace.dim
    storage = matrix.storage
    rows = [
        BenchRow(
            f"recall: hybrid grep p50, new questions, {count:,} messages ({vendor})",
            p50(cold),
            "ms",
            "< 50 ms",
            f"p95 {percentile(cold, 0.95):.1f} ms; CPU p50 {cold_cpu:.1f} ms; embed + BM25 + cosine + fusion + "
            f"neighbours + rows; model {active_backend().name}; {storage} cache; {load}",
        ),
        BenchRow(
            f"recall: hybrid grep p50, repeated questions, {count:,} messages ({vendor})",
            p50(warm),
            "ms",
            "< 50 ms",
            f"p95 {percentile(warm, 0.95):.1f} ms; CPU p50 {warm_cpu:.1f} ms; "
            "query vector from the LRU",
        ),
        BenchRow(
            f"recall: semantic grep p50, repeated questions, {count:,} messages ({vendor})",
            p50(semantic),
            "ms",
            "",
            f"p95 {percentile(semantic, 0.95):.1f} ms",
        ),
        BenchRow(
            f"recall: search_units alone p50, repeated questions, {count:,} units ({vendor})",
            p50(alone),
            "ms",
            "",
            f"p95 {percentile(alone, 0.95):.1f} ms; hybrid, k 50",
        ),
        BenchRow(
            f"recall: baseline single-message BM25 (pure Python), {count:,} messages",
            p50(base_times),
            "ms",
            "",
            f"index build {build_ms:,.0f} ms, same run",
        ),
        BenchRow(
            f"recall: unit cache fill (first search), {count:,} units ({vendor})",
            fill_ms,
            "ms",
            "",
            f"load of messages + units {load_seconds:.0f} s",
        ),
        BenchRow(
            f"recall: indexing throughput, {INDEXED:,} short messages ({vendor})",
            index_rate,
            "messages/s",
            "",
            f"chunk + embed ({active_backend().name}) + store, one process; "
            f"{index_units:,} units; {index_load}",
        ),
        BenchRow(
            f"recall: unit cache per unit ({storage} vectors)",
            per_row,
            "bytes",
            "",
            f"{vector_bytes / units:.0f} vector + {other_per_row:.0f} ids, seqs, speakers, "
            "postings, neighbours, the kept scope",
        ),
    ]
    for label, width in (("float32", dim * 4), ("int16 + scale", dim * 2 + 4)):
        size = million * (width + other_per_row) / 1e9
        rows.append(
            BenchRow(
                f"recall: unit cache at 1,000,000 units, {label} vectors (estimate)",
                size,
                "GB",
                "< 1.5 GB",
                f"{width} B vector + {other_per_row:.0f} B per unit (measured above)",
            )
        )
    return rows
