"""Archive segments: write, verify, clear, read back through the port, restore."""

from __future__ import annotations

import gzip

import pytest
from django.db import IntegrityError, connection, transaction

from archive import segments
from archive.models import Segment, SegmentState
from archive.selectors import forget
from archive.services import segment_archive, segment_restore
from conversations.archive_port import archived_contents, hydrate_messages
from conversations.models import ARCHIVED_PART_COLUMNS, Message, MessagePart
from core.crypto import MAGIC, generate_key


def _rows(conversation):
    """Every stored column of every message and part, straight from the tables."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT * FROM conversations_message WHERE conversation_id = %s ORDER BY seq",
            [conversation.pk],
        )
        messages = [row for row in cursor.fetchall()]
        cursor.execute(
            "SELECT p.* FROM conversations_messagepart p JOIN conversations_message m "
            "ON m.id = p.message_id WHERE m.conversation_id = %s ORDER BY p.id",
            [conversation.pk],
        )
        parts = [row for row in cursor.fetchall()]
    return messages, parts


def _forms(conversation):
    return segments.forms_of(
        list(Message.objects.filter(conversation=conversation).order_by("seq"))
    )


def test_it_archives_a_covered_range_and_restores_it_byte_identical(compacted, archive_folder):
    conversation, _ = compacted
    before_rows, before_forms = _rows(conversation), _forms(conversation)

    result = segment_archive(conversation=conversation, seq_from=1, seq_to=48)

    # The tail (41-48) is in the active context: only 1-40 move.
    assert result.archived == 40
    segment = result.segment
    assert (segment.seq_from, segment.seq_to, segment.message_count) == (1, 40, 40)
    assert segment.state == SegmentState.ACTIVE
    assert len(bytes(segment.message_hashes)) == 40 * 32
    assert (archive_folder / segment.key).is_file()
    archived = Message.objects.filter(conversation=conversation, seq__lte=40)
    assert set(archived.values_list("content", flat=True)) == {""}
    assert set(archived.values_list("archived_in", flat=True)) == {segment.pk}
    parts = MessagePart.objects.filter(message__in=archived)
    assert parts.count() > 0
    for column in ARCHIVED_PART_COLUMNS:
        assert set(parts.values_list(column, flat=True)) == {None}
    tail = Message.objects.filter(conversation=conversation, seq__gt=40)
    assert tail.filter(archived_in__isnull=True).count() == 8
    assert "" not in set(tail.values_list("content", flat=True))

    # Reads through the port see the original content and parts, marked as archived.
    read = hydrate_messages(
        Message.objects.filter(conversation=conversation).prefetch_related("parts").order_by("seq")
    )
    assert [m.from_archive for m in read] == [True] * 40 + [False] * 8
    assert [
        segments.canonical_form(m, sorted(m.parts.all(), key=lambda p: p.ordinal)) for m in read
    ] == before_forms

    restored = segment_restore(segment=segment)

    assert restored == 40
    after_messages, after_parts = _rows(conversation)
    assert after_parts == before_rows[1]
    # Identical rows except archived_in, which is back to NULL: every column, every row.
    assert after_messages == before_rows[0]
    assert _forms(conversation) == before_forms
    segment.refresh_from_db()
    assert segment.state == SegmentState.RESTORED
    assert not (archive_folder / segment.key).exists()


def test_archiving_again_is_a_no_op(compacted):
    conversation, _ = compacted
    first = segment_archive(conversation=conversation, seq_from=1, seq_to=20)

    again = segment_archive(conversation=conversation, seq_from=1, seq_to=20)

    assert first.archived == 20
    assert (again.segment, again.archived, again.skipped) == (None, 0, "nothing to archive")
    assert Segment.objects.count() == 1


def test_it_archives_nothing_in_the_active_context(compacted, archive_folder):
    conversation, _ = compacted

    result = segment_archive(conversation=conversation, seq_from=41, seq_to=48)

    assert (result.segment, result.archived) == (None, 0)
    assert Segment.objects.count() == 0
    assert list(archive_folder.rglob("*.seg")) == []
    assert Message.objects.filter(archived_in__isnull=False).count() == 0


@pytest.mark.parametrize("codec", ["zstd", "gzip"])
def test_both_codecs_round_trip(compacted, codec, archive_folder):
    conversation, _ = compacted
    before = _forms(conversation)

    segment = segment_archive(conversation=conversation, seq_from=1, seq_to=10, codec=codec).segment

    stored = (archive_folder / segment.key).read_bytes()
    assert stored.startswith(b"LCMSEG1 " + codec.encode() + b"\n")
    assert segment.stored_bytes == len(stored) < segment.raw_bytes
    forget()
    assert archived_contents([f["id"] for f in before[:10]]) == {
        f["id"]: f["content"] for f in before[:10]
    }
    if codec == "gzip":
        assert gzip.decompress(stored.split(b"\n", 1)[1]).startswith(b'{"format":1')


def test_segments_are_encrypted_when_a_key_is_set(compacted, archive_folder, settings):
    settings.LCM_ENCRYPTION_KEY = generate_key()
    conversation, _ = compacted
    before = _forms(conversation)

    segment = segment_archive(conversation=conversation, seq_from=1, seq_to=10).segment

    stored = (archive_folder / segment.key).read_bytes()
    assert stored.startswith(MAGIC)
    assert b"tests/test_cache.py" not in stored
    assert segment.encrypted is True
    forget()
    assert archived_contents([before[0]["id"]]) == {before[0]["id"]: before[0]["content"]}
    assert segment_restore(segment=segment) == 10
    assert _forms(conversation) == before


def test_a_corrupt_segment_is_refused_and_restore_changes_nothing(compacted, archive_folder):
    conversation, _ = compacted
    segment = segment_archive(conversation=conversation, seq_from=1, seq_to=10).segment
    path = archive_folder / segment.key
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF
    path.write_bytes(bytes(data))
    forget()
    first = Message.objects.get(conversation=conversation, seq=1)

    with pytest.raises(segments.SegmentError, match="does not match its recorded hash"):
        archived_contents([first.pk])
    with pytest.raises(segments.SegmentError):
        segment_restore(segment=segment)

    segment.refresh_from_db()
    assert segment.state == SegmentState.ACTIVE
    assert Message.objects.filter(archived_in=segment.pk).count() == 10


def _update(sql, params):
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)


def test_the_database_refuses_any_other_change_to_a_canonical_row(compacted):
    conversation, _ = compacted
    segment = segment_archive(conversation=conversation, seq_from=1, seq_to=10).segment
    live = Message.objects.get(conversation=conversation, seq=45)
    archived = Message.objects.get(conversation=conversation, seq=2)  # has parts
    assert MessagePart.objects.filter(message=archived).count() == 2
    refused = [
        # clearing content without an archive pointer
        ("UPDATE conversations_message SET content = '' WHERE id = %s", [live.pk]),
        # pointing at a segment without clearing
        ("UPDATE conversations_message SET archived_in = %s WHERE id = %s", [segment.pk, live.pk]),
        # changing an identity column of an archived message
        ("UPDATE conversations_message SET role = 'user' WHERE id = %s", [archived.pk]),
        ("UPDATE conversations_message SET token_count = 1 WHERE id = %s", [archived.pk]),
        # moving an archived message to another segment
        (
            "UPDATE conversations_message SET archived_in = archived_in + 1 WHERE id = %s",
            [archived.pk],
        ),  # fmt: skip
        # clearing the parts of a message that is not archived
        (
            "UPDATE conversations_messagepart SET text_content = NULL, tool_input = NULL, "
            "tool_output = NULL WHERE message_id = %s",
            [live.pk],
        ),  # fmt: skip
        # changing a part's identity while archived
        (
            "UPDATE conversations_messagepart SET tool_name = 'x' WHERE message_id = %s",
            [archived.pk],
        ),  # fmt: skip
    ]
    for sql, params in refused:
        with pytest.raises(IntegrityError, match="immutable"):
            _update(sql, params)
    assert Message.objects.get(pk=live.pk).content != ""
    assert Message.objects.get(pk=archived.pk).role == archived.role
    assert Message.objects.filter(archived_in=segment.pk).count() == 10
