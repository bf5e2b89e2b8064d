"""A burst of appends over several conversations is indexed by one job, one embedding call
per namespace, every message exactly once (LCM_MEMORY_INDEX_BATCH_CONVERSATIONS)."""

from functools import partial

import pytest

from conversations.models import Message
from memory.indexing import index_conversation_messages
from memory.models import Chunk, ChunkVector, MessageIndexCursor
from memory.namespaces import backend_for_namespace, write_namespaces
from tests.memory.helpers import append
from tests.support.concurrent import run_together


def _burst(make_conversation, capture, count: int, per: int) -> list:
    """`count` conversations, `per` appended messages each, their jobs queued (the hook)."""
    conversations = [make_conversation() for _ in range(count)]
    with capture(execute=True):
        for i, conversation in enumerate(conversations):
            append(conversation, *[f"note {i}-{j} about the shed roof" for j in range(per)])
    return conversations


def _indexed_once(conversations, per: int) -> None:
    for conversation in conversations:
        chunks = Chunk.objects.filter(conversation=conversation)
        assert sorted(chunks.values_list("seq_start", flat=True)) == list(range(1, per + 1))
        assert ChunkVector.objects.filter(chunk__in=chunks).count() == per
        cursor = MessageIndexCursor.objects.get(conversation=conversation)
        assert (cursor.last_seq, cursor.queued_at) == (per, None)


@pytest.mark.django_db
def test_one_job_indexes_the_queued_conversations_in_one_embedding_call(
    make_conversation, django_capture_on_commit_callbacks, monkeypatch
):
    conversations = _burst(make_conversation, django_capture_on_commit_callbacks, 3, 4)
    (namespace,) = write_namespaces()
    backend = backend_for_namespace(namespace)
    calls = []
    embed = backend.embed
    monkeypatch.setattr(backend, "embed", lambda texts: calls.append(len(texts)) or embed(texts))

    result = index_conversation_messages(conversation_id=conversations[1].pk)
    assert calls == [12]  # the three conversations' units, one call
    assert (result.chunks_created, result.vectors_created) == (12, 12)
    _indexed_once(conversations, 4)
    for conversation in conversations:  # their own queued jobs find nothing left
        assert index_conversation_messages(conversation_id=conversation.pk).chunks_created == 0


@pytest.mark.django_db
def test_a_round_reads_at_most_the_round_tokens_shared_between_conversations(
    make_conversation, django_capture_on_commit_callbacks, monkeypatch
):
    conversations = _burst(make_conversation, django_capture_on_commit_callbacks, 2, 5)
    tokens = Message.objects.filter(conversation=conversations[0]).first().token_count
    # room for six messages: the job takes both conversations (ten messages pending)
    monkeypatch.setattr("memory.indexing._ROUND_TOKENS", 6 * tokens + 1)
    (namespace,) = write_namespaces()
    backend = backend_for_namespace(namespace)
    calls = []
    embed = backend.embed
    monkeypatch.setattr(backend, "embed", lambda texts: calls.append(len(texts)) or embed(texts))

    index_conversation_messages(conversation_id=conversations[0].pk)
    assert calls == [6, 4]  # three messages of each conversation per round, then the rest
    _indexed_once(conversations, 5)


@pytest.mark.django_db
def test_a_batch_of_one_indexes_only_its_own_conversation(
    make_conversation, django_capture_on_commit_callbacks, settings
):
    settings.LCM_MEMORY_INDEX_BATCH_CONVERSATIONS = 1
    first, second = _burst(make_conversation, django_capture_on_commit_callbacks, 2, 2)
    assert index_conversation_messages(conversation_id=first.pk).chunks_created == 2
    assert not Chunk.objects.filter(conversation=second).exists()
    assert MessageIndexCursor.objects.get(conversation=second).queued_at is not None


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_batched_jobs_index_every_message_once(
    make_conversation, django_capture_on_commit_callbacks
):
    conversations = _burst(make_conversation, django_capture_on_commit_callbacks, 4, 5)
    run_together(
        *(partial(index_conversation_messages, conversation_id=c.pk) for c in conversations),
        timeout=60,
    )
    _indexed_once(conversations, 5)
