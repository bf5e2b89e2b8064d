"""Re-index after a model change: embed every chunk that lacks a vector in the namespace
being built, in batches (progress in chunks_done / chunks_total), then swap it in.
Resumable and idempotent: a restart continues with the chunks still missing."""

from __future__ import annotations

import logging

from django.db import transaction
from django.db.models import Exists, OuterRef

from memory.models import Chunk, ChunkVector, EmbeddingNamespace, NamespaceStatus
from memory.namespaces import activate, backend_for_namespace

logger = logging.getLogger("lcm.memory")

BATCH = 256


def reindex_namespace(*, namespace_id: int, batch: int = BATCH) -> EmbeddingNamespace:
    namespace = EmbeddingNamespace.objects.get(pk=namespace_id)
    if namespace.status == NamespaceStatus.ACTIVE:
        return namespace
    backend = backend_for_namespace(namespace)
    missing = Chunk.objects.filter(
        ~Exists(ChunkVector.objects.filter(chunk_id=OuterRef("pk"), namespace_id=namespace_id))
    )
    total = Chunk.objects.count()
    EmbeddingNamespace.objects.filter(pk=namespace_id).update(
        chunks_total=total, chunks_done=total - missing.count()
    )
    while True:
        rows = list(missing.order_by("id").values_list("id", "rendered_text")[:batch])
        if not rows:
            break
        matrix = backend.embed([text for _, text in rows])
        with transaction.atomic():
            ChunkVector.objects.bulk_create(
                [
                    ChunkVector(
                        namespace_id=namespace_id,
                        chunk_id=chunk_id,
                        vector=matrix[i].astype("<f4").tobytes(),
                    )
                    for i, (chunk_id, _) in enumerate(rows)
                ],
                ignore_conflicts=True,
            )
            done = ChunkVector.objects.filter(namespace_id=namespace_id).count()
            EmbeddingNamespace.objects.filter(pk=namespace_id).update(chunks_done=done)
    activate(namespace_id)
    namespace.refresh_from_db()
    return namespace
