"""Summary vectors: compaction summaries embedded so grep's semantic and hybrid modes
search summaries as well as chunks.

Summaries are indexed when they are created, not at query time (a conversation can hold
thousands; embedding them per query would cost seconds): compaction's after-commit hook
(`compaction.store.register_after_summary`) queues `memory.tasks.index_summaries` for the
conversation, which embeds every summary of it that lacks a vector in a write namespace
(the active one, and during a model change the one being built). One vector per (summary,
namespace), written with conflicts ignored: a retried or duplicated job writes nothing
twice, and a job for a conversation catches up summaries written without the hook (an
import). `manage.py lcm_memory index-summaries` does the same for every conversation.

A summary is embedded from its content, cut like any text at the model's input length
(256 word pieces for MiniLM): enough for what a summary is about.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
from django.db.models import Exists, OuterRef

from conversations.models import Summary
from core.job_queues import enqueue
from memory.embeddings import EmbeddingBackend, calibrate
from memory.models import EmbeddingNamespace, SummaryVector
from memory.namespaces import backend_for_namespace, write_namespaces
from memory.vectors import ScopeFilter

logger = logging.getLogger("lcm.memory")

TASK = "memory.tasks.index_summaries"
BATCH = 64


def missing_summaries(namespace_id: int, conversation_id: int | None = None):
    """Summaries without a vector in the namespace (optionally of one conversation)."""
    rows = Summary.objects.filter(
        ~Exists(SummaryVector.objects.filter(summary_id=OuterRef("pk"), namespace_id=namespace_id))
    )
    if conversation_id is not None:
        rows = rows.filter(conversation_id=conversation_id)
    return rows


def embed_into(
    namespace: EmbeddingNamespace, summaries: list[tuple[str, str]], backend=None
) -> int:
    """Embed (summary id, content) pairs into one namespace; returns vectors written."""
    if not summaries:
        return 0
    backend = backend or backend_for_namespace(namespace)
    matrix = backend.embed([content for _, content in summaries])
    made = SummaryVector.objects.bulk_create(
        [
            SummaryVector(
                namespace_id=namespace.pk,
                summary_id=summary_id,
                vector=matrix[i].astype("<f4").tobytes(),
            )
            for i, (summary_id, _) in enumerate(summaries)
        ],
        ignore_conflicts=True,
    )
    return len(made)


def index_summaries(*, conversation_id: int | None = None, batch: int = BATCH) -> int:
    """Embed the conversation's (or every) summary lacking a vector in a write namespace.
    Idempotent; each batch is embedded with no transaction open, then written at once."""
    written = 0
    for namespace in write_namespaces():
        backend = backend_for_namespace(namespace)
        after = ""
        while True:
            rows = list(
                missing_summaries(namespace.pk, conversation_id)
                .filter(pk__gt=after)
                .order_by("pk")
                .values_list("pk", "content")[:batch]
            )
            if not rows:
                break
            written += embed_into(namespace, rows, backend)
            after = rows[-1][0]
    return written


def schedule_after_summary(conversation_id: int) -> None:
    """Compaction's after-commit hook: queue the summary indexing job. Never raises."""
    try:
        # The main queue by name: compaction, which calls this, runs on the urgent one.
        enqueue(TASK, conversation_id)
    except Exception:
        logger.exception("queueing summary indexing failed for conversation %s", conversation_id)


# ---------------------------------------------------------------------------------------
# search


@dataclass(frozen=True)
class SummaryHit:
    summary: Summary
    cosine: float
    similarity: float  # calibrated, like chunks' (memory.embeddings.calibrate)


def search_summaries(
    *,
    namespace: EmbeddingNamespace,
    backend: EmbeddingBackend,
    query_vector: np.ndarray,
    scope: ScopeFilter,
    k: int,
) -> list[SummaryHit]:
    """The k summaries nearest the query in the namespace, within the scope, best first.
    Exact numpy scan over the per-process summary matrix (summaries are few next to
    chunks: one per ~10-20 messages, then a handful of condensed ones)."""
    from memory.vectors.numpy_exact import SUMMARY_INDEX

    hits = SUMMARY_INDEX.search(
        namespace_id=namespace.pk, query=query_vector, scope=scope, k=k, dim=namespace.dim
    )
    rows = Summary.objects.in_bulk([hit.chunk_id for hit in hits])
    return [
        SummaryHit(rows[hit.chunk_id], hit.similarity, calibrate(backend, hit.similarity))
        for hit in hits
        if hit.chunk_id in rows
    ]
