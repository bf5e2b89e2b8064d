"""Two workers indexing the same conversation at once write each chunk once."""

import threading

import pytest
from django.db import connection

from memory.indexing import index_conversation_messages
from memory.models import Chunk, ChunkVector, MessageIndexCursor
from tests.memory.helpers import append
from tests.support.concurrent import run_together


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_indexing_jobs_write_each_chunk_once(conversation, settings):
    settings.LCM_CHUNK_TOPIC_SHIFT = 2.0
    append(conversation, *[f"fact number {i} about topic {i}" for i in range(30)])
    run_together(
        lambda: index_conversation_messages(conversation_id=conversation.pk), times=3, timeout=60
    )
    chunks = Chunk.objects.filter(conversation=conversation)
    assert chunks.count() == 30
    assert ChunkVector.objects.filter(chunk__in=chunks).count() == 30
    assert MessageIndexCursor.objects.get(conversation=conversation).last_seq == 30


def _bare_chunk(conversation, text: str):
    import hashlib

    from django.utils import timezone

    return Chunk.objects.create(
        conversation=conversation,
        source_key=f"test:{text}",
        seq_start=1,
        seq_end=1,
        start_offset=0,
        end_offset=len(text),
        chunk_type="other",
        rendered_text=text,
        summary=text,
        token_est=2,
        content_hash=hashlib.sha256(text.encode()).hexdigest(),
        source_created_at=timezone.now(),
    )


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_vector_cache_sees_a_row_committed_after_a_higher_id(conversation):
    """PostgreSQL hands out ids before commit: a writer holding id n can commit after the
    cache loaded id n+1. The cache must still pick up row n (no id-only watermark)."""
    import numpy as np
    from django.db import transaction

    from memory.namespaces import search_namespace
    from memory.vectors import ScopeFilter
    from memory.vectors.numpy_exact import INDEX

    namespace = search_namespace()
    early, late = _bare_chunk(conversation, "early"), _bare_chunk(conversation, "late")
    e1, e2 = np.zeros(namespace.dim, np.float32), np.zeros(namespace.dim, np.float32)
    e1[0], e2[1] = 1.0, 1.0
    holding, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def slow_writer():
        try:
            with transaction.atomic():
                ChunkVector.objects.create(namespace=namespace, chunk=early, vector=e1.tobytes())
                holding.set()
                release.wait(30)
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)
        finally:
            connection.close()

    thread = threading.Thread(target=slow_writer)
    thread.start()
    assert holding.wait(30)
    ChunkVector.objects.create(namespace=namespace, chunk=late, vector=e2.tobytes())
    scope = ScopeFilter(conversations=((conversation.pk, None),))
    search = dict(namespace_id=namespace.pk, scope=scope, k=2, dim=namespace.dim)
    assert [hit.chunk_id for hit in INDEX.search(query=e2, **search)] == [late.pk]
    release.set()
    thread.join(30)
    assert errors == []
    assert [hit.chunk_id for hit in INDEX.search(query=e1, **search)][0] == early.pk
