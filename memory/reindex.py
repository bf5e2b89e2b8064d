"""Re-index after a model change: embed every chunk and every summary that lacks a vector
in the namespace being built, in batches (progress in chunks_done / chunks_total, which
count chunks and summaries together), then swap it in.

Resumable and idempotent: a restart continues with what is still missing, and vectors are
unique per (item, namespace). Searches keep reading the active namespace until the swap,
which is one transaction (memory.namespaces.activate): never half of each.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from django.db import transaction
from django.db.models import Exists, OuterRef, QuerySet

from conversations.models import Summary
from memory.archived_unit_text import texts_of
from memory.indexing import embed_units
from memory.models import (
    Chunk,
    ChunkVector,
    EmbeddingNamespace,
    NamespaceStatus,
    SummaryVector,
)
from memory.namespaces import activate, backend_for_namespace
from memory.summaries import embed_into, missing_summaries

logger = logging.getLogger("lcm.memory")

BATCH = 256
_MAX_PASSES = 5


def _done(namespace_id: int) -> int:
    return (
        ChunkVector.objects.filter(namespace_id=namespace_id).count()
        + SummaryVector.objects.filter(namespace_id=namespace_id).count()
    )


def reindex_namespace(
    *,
    namespace_id: int,
    batch: int = BATCH,
    on_batch: Callable[[EmbeddingNamespace], None] | None = None,
) -> EmbeddingNamespace:
    """Fill the namespace, then activate it. `on_batch(namespace)` runs after each batch
    with the progress just recorded (the command's progress bar)."""
    namespace = EmbeddingNamespace.objects.get(pk=namespace_id)
    if namespace.status == NamespaceStatus.ACTIVE:
        return namespace
    backend = backend_for_namespace(namespace)
    progress = _Progress(namespace, on_batch)
    progress.record()
    # Passes until nothing is missing: a chunk written meanwhile by a process that did
    # not yet see this namespace may sort before where a pass has got to.
    for _ in range(_MAX_PASSES):
        _embed_missing_chunks(namespace, backend, batch, progress)
        _embed_missing_summaries(namespace, backend, batch, progress)
        if not (_missing_chunks(namespace_id).exists() or missing_summaries(namespace_id).exists()):
            break
    activate(namespace_id)
    namespace.refresh_from_db()
    return namespace


class _Progress:
    """chunks_done / chunks_total of the namespace being built, stored after each batch."""

    def __init__(
        self, namespace: EmbeddingNamespace, on_batch: Callable[[EmbeddingNamespace], None] | None
    ) -> None:
        self.namespace, self.on_batch = namespace, on_batch
        self.total = Chunk.objects.count() + Summary.objects.count()

    def record(self) -> None:
        namespace = self.namespace
        done = _done(namespace.pk)
        EmbeddingNamespace.objects.filter(pk=namespace.pk).update(
            chunks_total=max(self.total, done), chunks_done=done
        )
        namespace.chunks_total, namespace.chunks_done = max(self.total, done), done
        if self.on_batch is not None:
            self.on_batch(namespace)


def _missing_chunks(namespace_id: int) -> QuerySet[Chunk]:
    return Chunk.objects.filter(
        ~Exists(ChunkVector.objects.filter(chunk_id=OuterRef("pk"), namespace_id=namespace_id))
    )


def _embed_missing_chunks(namespace, backend, batch: int, progress: _Progress) -> None:
    """One pass over the chunks without a vector in the namespace, in id order."""
    missing = _missing_chunks(namespace.pk)
    after = ""
    while True:
        rows = texts_of(  # units whose text is in the archive read it back
            list(
                missing.filter(pk__gt=after)
                .order_by("id")
                .values_list("id", "rendered_text")[:batch]
            )
        )
        if not rows:
            return
        matrix = _vectors(namespace, backend, rows)
        with transaction.atomic():
            ChunkVector.objects.bulk_create(
                [
                    ChunkVector(
                        namespace_id=namespace.pk,
                        chunk_id=chunk_id,
                        vector=matrix[i].astype("<f4").tobytes(),
                    )
                    for i, (chunk_id, _) in enumerate(rows)
                ],
                ignore_conflicts=True,
            )
        after = rows[-1][0]
        progress.record()


def _vectors(namespace, backend, rows: list[tuple[str, str]]) -> np.ndarray:
    """The rows' vectors; zeros, not embedded, for lexical-only units (as indexing
    stores them, memory.indexing.embed_units)."""
    lexical = set(
        Chunk.objects.filter(pk__in=[pk for pk, _ in rows], lexical_only=True).values_list(
            "pk", flat=True
        )
    )
    specs = [_Unit(text, pk not in lexical) for pk, text in rows]
    return embed_units(backend, namespace, specs)


@dataclass(frozen=True)
class _Unit:
    rendered_text: str
    embedded: bool


def _embed_missing_summaries(namespace, backend, batch: int, progress: _Progress) -> None:
    """One pass over the summaries without a vector in the namespace, in id order."""
    after = ""
    while True:
        rows = list(
            missing_summaries(namespace.pk)
            .filter(pk__gt=after)
            .order_by("pk")
            .values_list("pk", "content")[:batch]
        )
        if not rows:
            return
        embed_into(namespace, rows, backend)
        after = rows[-1][0]
        progress.record()
