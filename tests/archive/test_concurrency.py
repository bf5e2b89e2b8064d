"""Archiving while writers append and compaction runs (PostgreSQL, real threads): no message
is lost or duplicated, every one reads back its own content, the archive checks are clean."""

from __future__ import annotations

import threading

import pytest
from django.test import override_settings

from archive.models import Segment
from compaction.engine import compact_conversation
from conversations.archive_port import hydrate_messages
from conversations.models import Message
from integrity.checks import Scope
from integrity.report import scan
from retention.models import RetentionPolicy
from retention.services import retention_apply, retention_plan
from tests.factories import append_messages, message_payload
from tests.support.concurrent import run_together


def _writer(conversation, writing: threading.Event, first: int, last: int):
    """Appends messages first..last-1 in twenties, then clears `writing`."""

    def write():
        try:
            for start in range(first, last, 20):
                append_messages(conversation, 20, start=start)
        finally:
            writing.clear()

    return write


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@override_settings(
    LCM_LEAF_CHUNK_TOKENS=600, LCM_LEAF_MIN_FANOUT=3, LCM_CONDENSED_MIN_FANOUT=2,
    LCM_ARCHIVE_SEGMENT_MESSAGES=40,
)  # fmt: skip
def test_archiving_during_appends_and_compaction_loses_and_duplicates_nothing(conversation):
    append_messages(conversation, 400)
    compact_conversation(conversation_id=conversation.pk, mode="full")
    RetentionPolicy.objects.create(conversation=conversation, keep_newest_tokens=1)
    writing = threading.Event()
    writing.set()
    archived_runs: list[int] = []

    write = _writer(conversation, writing, 400, 700)

    def compact():
        while writing.is_set():
            compact_conversation(conversation_id=conversation.pk, mode="full")

    def archive():
        while writing.is_set() or len(archived_runs) < 2:
            result = retention_apply(ranges=retention_plan(conversations=[conversation]))
            archived_runs.append(result.messages)

    run_together(write, compact, archive, timeout=300)
    assert sum(archived_runs) > 0
    seqs = list(Message.objects.filter(conversation=conversation).values_list("seq", flat=True))
    assert sorted(seqs) == list(range(1, 701))  # 0 lost, 0 duplicated
    messages = hydrate_messages(
        Message.objects.filter(conversation=conversation).prefetch_related("parts").order_by("seq")
    )
    assert [m.content for m in messages] == [message_payload(i)["content"] for i in range(700)]
    archived = [m for m in messages if m.from_archive]
    assert len(archived) == sum(archived_runs)
    segments = Segment.objects.filter(conversation=conversation)
    assert sum(s.message_count for s in segments) == len(archived)
    counts = scan(Scope(conversation_id=conversation.pk)).counts()
    archive_checks = (
        "archived_message_unplaced",
        "archive_segment_missing",
        "archive_segment_corrupt",
    )
    assert {name: counts.get(name, 0) for name in archive_checks} == dict.fromkeys(
        archive_checks, 0
    )


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@override_settings(
    LCM_LEAF_CHUNK_TOKENS=600, LCM_LEAF_MIN_FANOUT=3, LCM_CONDENSED_MIN_FANOUT=2,
    LCM_ARCHIVE_SEGMENT_MESSAGES=40, LCM_RETENTION_ARCHIVED_VECTORS="int8",
    LCM_RETENTION_ARCHIVED_FULLTEXT="archive",
)  # fmt: skip
def test_the_memory_step_during_appends_indexing_and_compaction_stays_consistent(conversation):
    """With a policy that compresses the memory of archived content: archiving (and its
    memory step) runs while writers append, indexing cuts new memory units and compaction
    runs. No message is lost or duplicated; no unit with a live message is ever compressed
    or loses its full-text row or its text; once quiet, every archived unit is compressed
    and its text is in the archive, read back exactly."""
    from memory.archived_content_policy import archived_chunks
    from memory.archived_unit_text import hydrate_chunks
    from memory.chunker import content_hash
    from memory.indexing import index_conversation_messages
    from memory.models import Chunk, ChunkVector
    from memory.vectors.codec import vector_format
    from retention.services import retention_memory_apply

    append_messages(conversation, 300)
    compact_conversation(conversation_id=conversation.pk, mode="full")
    index_conversation_messages(conversation_id=conversation.pk)
    RetentionPolicy.objects.create(conversation=conversation, keep_newest_tokens=1)
    writing = threading.Event()
    writing.set()
    archived_runs: list[int] = []
    compressed_runs: list[int] = []

    write = _writer(conversation, writing, 300, 500)

    def compact():
        while writing.is_set():
            compact_conversation(conversation_id=conversation.pk, mode="full")

    def index():
        while writing.is_set():
            index_conversation_messages(conversation_id=conversation.pk)

    def archive():
        while writing.is_set() or len(archived_runs) < 2:
            result = retention_apply(ranges=retention_plan(conversations=[conversation]))
            archived_runs.append(result.messages)
            compressed_runs.append(result.memory["vectors_compressed"])

    run_together(write, compact, index, archive, timeout=300)
    assert sum(archived_runs) > 0 and sum(compressed_runs) > 0
    seqs = list(Message.objects.filter(conversation=conversation).values_list("seq", flat=True))
    assert sorted(seqs) == list(range(1, 501))  # 0 lost, 0 duplicated
    messages = hydrate_messages(
        Message.objects.filter(conversation=conversation).prefetch_related("parts").order_by("seq")
    )
    assert [m.content for m in messages] == [message_payload(i)["content"] for i in range(500)]

    def states():
        archived = set(
            archived_chunks(conversation_id=conversation.pk).values_list("pk", flat=True)
        )
        rows = ChunkVector.objects.filter(chunk__conversation=conversation).values_list(
            "chunk_id",
            "vector",
            "namespace__dim",
            "chunk__fulltext_dropped_at",
            "chunk__text_archived_at",
        )
        return archived, [
            (c, (vector_format(v, d), dropped is not None, moved is not None))
            for c, v, d, dropped, moved in rows
        ]

    texts = dict(Chunk.objects.filter(conversation=conversation).values_list("pk", "content_hash"))
    archived, rows = states()
    live = [state for c, state in rows if c not in archived]
    assert live and set(live) == {("float32", False, False)}
    retention_memory_apply(conversations=[conversation])  # quiet now: catches up
    archived, rows = states()
    assert archived and {state for c, state in rows if c in archived} == {("int8", True, True)}
    assert Chunk.objects.filter(conversation=conversation).count() == len(rows)
    read = hydrate_chunks(Chunk.objects.filter(conversation=conversation))  # checks each hash
    assert {c.pk: content_hash(c.rendered_text) for c in read} == {
        pk: digest for pk, digest in texts.items() if pk in {c.pk for c in read}
    }
