"""Two workers indexing the same conversation at once write each chunk once."""

import threading

import pytest
from django.db import connection

from memory.indexing import index_conversation_messages
from memory.models import Chunk, ChunkVector, MessageIndexCursor
from tests.memory.helpers import append


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_indexing_jobs_write_each_chunk_once(conversation, settings):
    settings.LCM_CHUNK_TOPIC_SHIFT = 2.0
    append(conversation, *[f"fact number {i} about topic {i}" for i in range(30)])
    barrier = threading.Barrier(3)
    errors: list[BaseException] = []

    def work():
        try:
            barrier.wait()
            index_conversation_messages(conversation_id=conversation.pk)
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=work) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    chunks = Chunk.objects.filter(conversation=conversation)
    assert chunks.count() == 30
    assert ChunkVector.objects.filter(chunk__in=chunks).count() == 30
    assert MessageIndexCursor.objects.get(conversation=conversation).last_seq == 30
