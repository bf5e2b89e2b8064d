"""memory 0005 (the memory of archived content) migrates back while nothing is compressed or
dropped, and refuses to while something is; forward again, search works as before."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from memory.fulltext import search_chunks
from memory.indexing import index_conversation_messages
from memory.models import Chunk, ChunkVector
from memory.vectors import ScopeFilter
from tests.memory.helpers import append

pytestmark = pytest.mark.usefixtures("offline_engine", "fresh_vector_caches")

BEFORE = [("memory", "0004_index_cursor_queued_at")]


def _migrate(targets) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)


@pytest.fixture(autouse=True)
def _latest_schema_after():
    yield
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


def _found(conversation) -> list[str]:
    scope = ScopeFilter(conversations=((conversation.pk, None),))
    return [c for c, _ in search_chunks(query="zeppelin", scope=scope, k=5)]


@pytest.mark.django_db(transaction=True)
def test_memory_0005_migrates_back_and_forth(conversation):
    append(conversation, "The zeppelin hangar opens at dawn.")
    index_conversation_messages(conversation_id=conversation.pk)
    [chunk] = Chunk.objects.filter(conversation=conversation)
    vector = ChunkVector.objects.get(chunk=chunk)

    _migrate(BEFORE)

    assert _found(conversation) == [chunk.pk]
    # 0002's trigger again: no update at all
    with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "UPDATE memory_chunkvector SET vector = %s WHERE id = %s",
            [bytes(vector.vector), vector.pk],
        )
    _migrate([("memory", "0005_archived_content")])
    assert _found(conversation) == [chunk.pk]
    Chunk.objects.filter(pk=chunk.pk).update(fulltext_dropped_at=timezone.now())
    assert _found(conversation) == []
    Chunk.objects.filter(pk=chunk.pk).update(fulltext_dropped_at=None)
    assert _found(conversation) == [chunk.pk]


@pytest.mark.django_db(transaction=True)
def test_memory_0005_refuses_to_migrate_back_while_a_row_is_dropped(conversation):
    append(conversation, "The zeppelin hangar opens at dawn.")
    index_conversation_messages(conversation_id=conversation.pk)
    Chunk.objects.update(fulltext_dropped_at=timezone.now())

    with pytest.raises(RuntimeError, match="restore it first"):
        _migrate(BEFORE)

    assert Chunk.objects.filter(fulltext_dropped_at__isnull=False).count() == 1
