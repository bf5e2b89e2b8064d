import pytest
from django.db import IntegrityError, transaction

from memory.indexing import index_conversation_messages
from memory.models import Chunk, ChunkVector, EmbeddingNamespace, MessageIndexCursor
from tests.memory.helpers import append

pytestmark = pytest.mark.django_db


@pytest.mark.embedding_model
def test_it_chunks_and_embeds_api_messages_once(conversation):
    append(conversation, "We decided to deploy the billing service on Fridays.", "Sounds good.")
    first = index_conversation_messages(conversation_id=conversation.pk)
    assert first.chunks_created >= 1
    assert first.vectors_created == first.chunks_created
    chunks = Chunk.objects.filter(conversation=conversation)
    assert chunks.count() == first.chunks_created
    assert ChunkVector.objects.filter(chunk__conversation=conversation).count() == chunks.count()
    assert MessageIndexCursor.objects.get(conversation=conversation).last_seq == 2
    namespace = EmbeddingNamespace.objects.get()
    assert (namespace.model, namespace.dim, namespace.status) == (
        "all-MiniLM-L6-v2-int8",
        384,
        "active",
    )

    again = index_conversation_messages(conversation_id=conversation.pk)
    assert (again.chunks_created, again.vectors_created) == (0, 0)
    assert Chunk.objects.filter(conversation=conversation).count() == first.chunks_created


def test_new_messages_are_indexed_after_the_cursor(conversation):
    append(conversation, "first message about the garden")
    index_conversation_messages(conversation_id=conversation.pk)
    append(conversation, "second message about the car")
    result = index_conversation_messages(conversation_id=conversation.pk)
    assert result.chunks_created == 1
    chunk = Chunk.objects.filter(conversation=conversation).order_by("seq_start").last()
    assert (chunk.seq_start, chunk.seq_end) == (2, 2)
    assert chunk.source_key == f"msg:{conversation.pk}:2-2"
    assert chunk.rendered_text == "second message about the car"


def test_a_crashed_run_replayed_creates_no_duplicates(conversation):
    """A worker that stored chunks but died before the cursor moved is impossible (one
    transaction); one that re-runs after a cursor reset only meets the unique keys."""
    append(conversation, "Alpha fact: the vault code is 4471.", "Noted.")
    index_conversation_messages(conversation_id=conversation.pk)
    count = Chunk.objects.count()
    vectors = ChunkVector.objects.count()
    MessageIndexCursor.objects.filter(conversation=conversation).update(last_seq=0)
    result = index_conversation_messages(conversation_id=conversation.pk)
    assert (result.chunks_created, result.vectors_created) == (0, 0)
    assert (Chunk.objects.count(), ChunkVector.objects.count()) == (count, vectors)


def test_the_database_refuses_a_duplicate_chunk_and_vector(conversation):
    append(conversation, "one message")
    index_conversation_messages(conversation_id=conversation.pk)
    chunk = Chunk.objects.get()
    clone = Chunk(
        conversation=conversation,
        source_key=chunk.source_key,
        seq_start=1,
        seq_end=1,
        start_offset=0,
        end_offset=1,
        chunk_type=chunk.chunk_type,
        rendered_text=chunk.rendered_text,
        summary="",
        token_est=1,
        content_hash=chunk.content_hash,
        source_created_at=chunk.source_created_at,
    )
    with pytest.raises(IntegrityError), transaction.atomic():
        clone.save(force_insert=True)
    vector = ChunkVector.objects.get()
    with pytest.raises(IntegrityError), transaction.atomic():
        ChunkVector.objects.create(
            namespace_id=vector.namespace_id, chunk=chunk, vector=bytes(vector.vector)
        )
    assert (Chunk.objects.count(), ChunkVector.objects.count()) == (1, 1)


@pytest.mark.embedding_model
def test_chunks_and_vectors_refuse_updates(conversation):
    append(conversation, "immutable text")
    index_conversation_messages(conversation_id=conversation.pk)
    with pytest.raises(IntegrityError), transaction.atomic():
        Chunk.objects.update(rendered_text="rewritten")
    with pytest.raises(IntegrityError), transaction.atomic():
        ChunkVector.objects.update(vector=b"\x00" * 1024)
    assert Chunk.objects.get().rendered_text == "immutable text"
