"""Indexing under load (`lcm_bench --only embeddings_mixed`, issue 33): one worker thread
drains the indexing queue while a writer appends real chat messages at a fixed rate and a
searcher keeps asking semantic searches, all in this process against the configured
database (the service calls the API's views make: `messages_append`, `search_units`).

The searcher asks, every 0.1 s, for the oldest message not found yet (its own text as
the query, semantic mode, scoped to its conversation) and records when it first comes
back: the time from a message stored to found by semantic search. Each variant runs the
same script: numpy (today's fp32 vectors), the runtime's int8 one conversation per job (as
indexing was before batching) and int8 batched (LCM_MEMORY_INDEX_BATCH_CONVERSATIONS, the
default: a job also takes the conversations whose job is queued); between them the others'
namespaces are retired, so each indexes into one namespace only. The worker runs the jobs the
append hook queues (django_q's async_task is replaced by the worker's queue for the run):
one per conversation while one is queued and not started, as with the cluster.
EMBEDDINGS_MIXED_VARIANTS (comma-separated names) picks variants,
EMBEDDINGS_MIXED_CONVERSATIONS (default 4) how many conversations the writer spreads its
messages over; EMBEDDINGS_MIXED_RATE
(messages/s offered, default 8) and EMBEDDINGS_MIXED_SECONDS (default 40, times --scale)
set the load.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from unittest import mock

from django.conf import settings
from django.db import connection
from django.test.utils import override_settings

from benchmarks.conversations import new_conversation
from benchmarks.embeddings import chat_messages
from benchmarks.harness import BenchContext, BenchRow, benchmark, p50, percentile
from conversations.inputs import MessageInput
from conversations.services import messages_append
from memory import embeddings
from memory.embeddings.minilm_numpy import MiniLMNumpy
from memory.index_queue import TASK
from memory.indexing import index_conversation_messages
from memory.models import EmbeddingNamespace, NamespaceStatus
from memory.recall import search_units
from memory.vectors import ScopeFilter

CONVERSATIONS = int(os.environ.get("EMBEDDINGS_MIXED_CONVERSATIONS", "4"))
# (name, LCM_EMBEDDING_MODEL, LCM_MEMORY_INDEX_BATCH_CONVERSATIONS): numpy and int8 as
# indexing was before batching (one conversation per job), then int8 batched (the default)
VARIANTS = (
    ("numpy", "fp32", 1),
    ("onnx int8", "int8", 1),
    ("onnx int8 batched", "int8", 16),
)
PROBE_INTERVAL = 0.1  # seconds between the searcher's searches (the latency's resolution)
DRAIN_LIMIT = 180.0  # seconds to wait for the backlog after the writer stops


class _Run:
    def __init__(self, texts: list[str], seconds: float, rate: float) -> None:
        self.texts, self.seconds, self.rate = texts, seconds, rate
        self.jobs: queue.Queue = queue.Queue()
        self.stored: list[tuple[int, int, str, float]] = []  # conversation, seq, text, when
        self.found: dict[int, float] = {}
        self.search_ms: list[float] = []
        self.indexed_units = 0
        self.busy = 0.0
        self.peak = 0
        self.writing = True
        self.errors: list[BaseException] = []

    def worker(self) -> None:
        try:
            while (conversation_id := self.jobs.get()) is not None:
                start = time.perf_counter()
                result = index_conversation_messages(conversation_id=conversation_id)
                self.busy += time.perf_counter() - start
                self.indexed_units += result.chunks_created
        except BaseException as error:  # noqa: BLE001 - raised by the caller
            self.errors.append(error)
        finally:
            connection.close()

    def enqueue(self, task: str, *args, **kwargs) -> None:
        """django_q's async_task while the run lasts: the indexing jobs the append hook
        queues (one per conversation while one is queued and not started) go to the
        worker; other apps' jobs are dropped."""
        if task == TASK:
            self.jobs.put(args[0])

    def writer(self, conversations) -> None:
        start = time.perf_counter()
        for i, text in enumerate(self.texts):
            due = start + i / self.rate
            if due - start > self.seconds:
                break
            time.sleep(max(0.0, due - time.perf_counter()))
            conversation = conversations[i % len(conversations)]
            appended = messages_append(
                conversation_id=conversation.pk, messages=[MessageInput(role="user", content=text)]
            )
            seq = appended[0].message.seq
            self.stored.append((conversation.pk, seq, text, time.perf_counter()))
            self.peak = max(self.peak, self.jobs.qsize())
        self.writing = False
        connection.close()

    def searcher(self) -> None:
        try:
            deadline = None
            while True:
                pending = [s for s in list(self.stored) if s[3] not in self.found]
                if not pending:
                    if not self.writing:
                        return
                    time.sleep(0.05)
                    continue
                if not self.writing:
                    deadline = deadline or time.perf_counter() + DRAIN_LIMIT
                    if time.perf_counter() > deadline:
                        return
                conversation_id, seq, text, when = pending[0]
                begun = time.perf_counter()
                hits = search_units(
                    scope=ScopeFilter(conversations=((conversation_id, None),)),
                    query=text,
                    k=5,
                    mode="semantic",
                ).hits
                self.search_ms.append((time.perf_counter() - begun) * 1000)
                time.sleep(max(0.0, PROBE_INTERVAL - (time.perf_counter() - begun)))
                if any(h.chunk.seq_start <= seq <= h.chunk.seq_end for h in hits):
                    self.found[when] = time.perf_counter() - when
        except BaseException as error:  # noqa: BLE001 - raised by the caller
            self.errors.append(error)
        finally:
            connection.close()


def _activate(model: str) -> None:
    """Only `model`'s namespace active (created on first use), the others retired."""
    EmbeddingNamespace.objects.exclude(model=model).update(status=NamespaceStatus.RETIRED)
    EmbeddingNamespace.objects.filter(model=model).update(status=NamespaceStatus.ACTIVE)


def _mixed(variant: str, texts: list[str], seconds: float, rate: float) -> _Run:
    run = _Run(texts, seconds, rate)
    conversations = [new_conversation(f"mixed-{variant}-{i}") for i in range(CONVERSATIONS)]
    threads = [
        threading.Thread(target=run.worker, name="mixed-worker"),
        threading.Thread(target=run.writer, args=(conversations,), name="mixed-writer"),
        threading.Thread(target=run.searcher, name="mixed-searcher"),
    ]
    with mock.patch("django_q.tasks.async_task", run.enqueue):
        _join(threads, run)
    if run.errors:
        raise run.errors[0]
    return run


def _join(threads: list[threading.Thread], run: _Run) -> None:
    for thread in threads:
        thread.start()
    threads[1].join()
    threads[2].join()
    run.jobs.put(None)
    threads[0].join()


def _rows(variant: str, run: _Run, load: tuple[float, float]) -> list[BenchRow]:
    latencies = sorted(run.found.values())
    stored = len(run.stored)
    return [
        BenchRow(
            f"mixed {variant}: worker indexing throughput",
            stored / run.busy if run.busy else 0.0,
            "messages/s",
            "",
            f"{run.indexed_units / run.busy if run.busy else 0:.1f} units/s of worker time; "
            f"{stored} messages offered at {run.rate:g}/s, backlog peak {run.peak} jobs; "
            f"load {load[0]:.1f} -> {load[1]:.1f}",
        ),
        BenchRow(
            f"mixed {variant}: stored -> found by semantic search, p50",
            p50(latencies) if latencies else float("nan"),
            "s",
            "",
            f"p95 {percentile(latencies, 0.95) if latencies else float('nan'):.2f} s; "
            f"{len(latencies)} of {stored} found; {len(run.search_ms)} searches, "
            f"p50 {p50(run.search_ms):.0f} ms, p95 {percentile(run.search_ms, 0.95):.0f} ms",
        ),
    ]


@benchmark("embeddings_mixed")
def embeddings_mixed(ctx: BenchContext) -> list[BenchRow]:
    seconds = float(os.environ.get("EMBEDDINGS_MIXED_SECONDS", "40")) * ctx.scale
    rate = float(os.environ.get("EMBEDDINGS_MIXED_RATE", "8"))
    texts = chat_messages(ctx)
    rows = []
    chosen = os.environ.get("EMBEDDINGS_MIXED_VARIANTS")
    for variant, model, batch in VARIANTS:
        if chosen and variant not in chosen.split(","):
            continue
        with override_settings(
            LCM_EMBEDDING_BACKEND="minilm",
            LCM_EMBEDDING_MODEL=model,
            LCM_MEMORY_INDEX_BATCH_CONVERSATIONS=batch,
        ):
            backend = embeddings.backend_for("minilm", model)
            if variant == "numpy":  # the same model name: numpy computes its vectors
                backend = embeddings._cache[("minilm", "fp32")] = MiniLMNumpy()
            backend.embed(["warm up"])
            _activate(backend.name)
            before = os.getloadavg()[0]
            run = _mixed(variant, texts, seconds, rate)
            rows += _rows(variant, run, (before, os.getloadavg()[0]))
        embeddings._cache.pop(("minilm", "fp32"), None)
    ctx.notes.append(
        f"embeddings_mixed: {settings.DATABASES['default']['ENGINE'].rsplit('.', 1)[-1]}, "
        f"{CONVERSATIONS} conversations, {rate:g} messages/s offered for {seconds:.0f} s"
    )
    return rows
