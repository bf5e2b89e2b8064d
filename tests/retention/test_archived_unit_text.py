"""`archived_fulltext = archive` (memory.archived_unit_text, docs/retention.md): the text of an
archived memory unit leaves the database with its full-text row and is read back from its
archived message by every reader; a policy change or a restore puts it back, checked
against the unit's hash; the database refuses any other change to a unit's text."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from archive.models import Segment
from archive.selectors import forget
from memory.archived_unit_text import hydrate_chunks, texts_of
from memory.chunker import content_hash, extractive_summary
from memory.fulltext import search_chunks
from memory.models import Chunk
from memory.recall import items_from_units, search_units
from memory.turn_retrieval import items_for_chunk_ids
from memory.vectors import ScopeFilter
from retention.models import RetentionPolicy
from retention.services import retention_memory_apply, retention_restore, retention_status
from tests.archive.conftest import archive_folder  # noqa: F401
from tests.retention.test_archived_memory import (
    EXPECTED,
    FACT,
    QUERIES,
    _archive,
    _conversation_with_fact,
    _fts_consistent,
    grep_matrix,
)

pytestmark = pytest.mark.usefixtures("offline_engine", "fresh_vector_caches")


def _fact(conversation) -> Chunk:
    return Chunk.objects.get(conversation=conversation, seq_start=1)


def _archived_units(conversation):
    return Chunk.objects.filter(conversation=conversation, seq_end__lte=8)


def _texts(conversation) -> dict[str, tuple[str, str]]:
    rows = Chunk.objects.filter(conversation=conversation).values_list(
        "pk", "rendered_text", "summary"
    )
    return {pk: (text, summary) for pk, text, summary in rows}


def test_the_text_leaves_the_database_and_every_reader_reads_it_back(
    api, conversation, settings, user
):
    _conversation_with_fact(conversation, settings)
    before = _texts(conversation)

    result = _archive(conversation, vectors="int8", fulltext="archive")

    archived = _archived_units(conversation).count()
    assert archived >= 8
    assert (result.memory["text_archived"], result.memory["text_kept"]) == (archived, 0)
    assert result.memory["fulltext_dropped"] == archived
    stored = _fact(conversation)
    assert (stored.rendered_text, stored.summary) == ("", "")
    assert stored.text_archived_at is not None and stored.fulltext_dropped_at is not None
    assert all(
        before[c.pk] == (c.rendered_text, c.summary) for c in Chunk.objects.filter(seq_end__gt=8)
    )
    assert retention_status(conversations=[conversation])["memory_text_archived_chunks"] == archived

    # hydration gives back each text and summary exactly, marked as read from the archive
    forget()
    read = hydrate_chunks(_archived_units(conversation))
    assert {c.pk: (c.rendered_text, c.summary) for c in read} == {
        pk: value for pk, value in before.items() if pk in {c.pk for c in read}
    }
    assert all(c.text_from_archive for c in read)
    # grep finds the archived fact the same ways as under the other policies, its snippet
    # read from the archive (semantic and hybrid through its vector)
    assert grep_matrix(api, conversation) == EXPECTED
    # memory_search's items, attached chunks, and the re-embedding's rows read it back too
    scope = ScopeFilter(conversations=((conversation.pk, None),))
    hits = search_units(scope=scope, query=QUERIES["semantic"], k=3).hits
    assert FACT in [item.text for item in items_from_units(hits)]
    assert [i.text for i in items_for_chunk_ids([stored.pk], user)] == [FACT]
    assert texts_of([(stored.pk, ""), ("other", "kept")]) == [(stored.pk, FACT), ("other", "kept")]
    # the memory full-text leg does not find it (its row is dropped)
    assert search_chunks(query="automobile", scope=scope, k=5) == []
    _fts_consistent()


def test_restore_puts_the_text_and_the_full_text_rows_back(conversation, settings):
    _conversation_with_fact(conversation, settings)
    before = _texts(conversation)
    _archive(conversation, vectors="keep", fulltext="archive")

    assert retention_restore(conversation=conversation) == 8

    assert _texts(conversation) == before
    assert not Chunk.objects.filter(text_archived_at__isnull=False).exists()
    assert not Chunk.objects.filter(fulltext_dropped_at__isnull=False).exists()
    scope = ScopeFilter(conversations=((conversation.pk, None),))
    assert [c for c, _ in search_chunks(query="automobile", scope=scope, k=5)] == [
        _fact(conversation).pk
    ]
    _fts_consistent()


def test_a_policy_back_at_drop_then_keep_puts_the_text_then_the_rows_back(conversation, settings):
    _conversation_with_fact(conversation, settings)
    before = _texts(conversation)
    _archive(conversation, vectors="keep", fulltext="archive")
    archived = _archived_units(conversation).count()

    RetentionPolicy.objects.filter(conversation=conversation).update(archived_fulltext="drop")
    result = retention_memory_apply()
    assert (result.text_restored, result.fulltext_restored) == (archived, 0)
    assert _texts(conversation) == before
    assert _fact(conversation).fulltext_dropped_at is not None

    RetentionPolicy.objects.filter(conversation=conversation).update(archived_fulltext="keep")
    result = retention_memory_apply()
    assert (result.text_restored, result.fulltext_restored) == (0, archived)
    RetentionPolicy.objects.filter(conversation=conversation).update(archived_fulltext="archive")
    assert retention_memory_apply().text_archived == archived
    assert retention_memory_apply().as_dict() == dict.fromkeys(result.as_dict(), 0)
    _fts_consistent()


def test_a_unit_the_archive_cannot_give_back_exactly_keeps_its_text(conversation, settings):
    """Only a unit whose message holds its exact text at its offsets leaves: one written
    with other offsets (as a turn's chunk over several messages has) stays."""
    _conversation_with_fact(conversation, settings)
    odd = Chunk.objects.create(
        conversation=conversation, source_key=f"msg:{conversation.pk}:2-2", seq_start=2, seq_end=2,
        start_offset=5, end_offset=40, chunk_type="other", rendered_text="not what message 2 holds there",
        summary="not what message 2 holds there", token_est=8,
        content_hash=content_hash("not what message 2 holds there"), source_created_at=timezone.now(),
    )  # fmt: skip

    result = _archive(conversation, vectors="keep", fulltext="archive")

    assert result.memory["text_kept"] == 1
    odd.refresh_from_db()
    assert odd.rendered_text == "not what message 2 holds there" and odd.text_archived_at is None
    assert odd.fulltext_dropped_at is not None


def test_a_missing_segment_fails_the_read_with_its_503_never_empty_text(
    api, conversation, settings
):
    _conversation_with_fact(conversation, settings)
    _archive(conversation, vectors="keep", fulltext="archive")
    from archive import segments

    for segment in Segment.objects.all():
        segments.delete(segment.key)
    forget()

    response = api.post(
        "/api/v1/grep/",
        {
            "conversation_id": conversation.pk,
            "query": QUERIES["semantic"],
            "mode": "semantic",
            "scope": "messages",
        },
        format="json",
    )

    assert response.status_code == 503
    assert response.json()["code"] == "archive_unavailable"


@pytest.mark.parametrize(
    "change",
    [
        # text emptied without being marked as in the archive
        {"rendered_text": "", "summary": ""},
        # marked as in the archive while its full-text row still exists
        "archive_with_fulltext",
        # marked, but the text kept
        "archive_keeping_text",
        # a text changed in place
        {"rendered_text": "changed", "summary": "changed"},
    ],
)
def test_the_database_refuses_any_other_change_to_a_units_text(conversation, settings, change):
    _conversation_with_fact(conversation, settings)
    chunk = _fact(conversation)
    if change == "archive_with_fulltext":
        change = {"rendered_text": "", "summary": "", "text_archived_at": timezone.now()}
    elif change == "archive_keeping_text":
        Chunk.objects.filter(pk=chunk.pk).update(fulltext_dropped_at=timezone.now())
        change = {"text_archived_at": timezone.now()}
    with pytest.raises(IntegrityError), transaction.atomic():
        Chunk.objects.filter(pk=chunk.pk).update(**change)
    stored = Chunk.objects.get(pk=chunk.pk)
    assert (stored.rendered_text, stored.summary, stored.text_archived_at) == (
        FACT,
        extractive_summary(FACT),
        None,
    )


@pytest.mark.postgres  # the hash check in SQL (SQLite: memory.archived_unit_text checks it)
def test_postgresql_refuses_a_text_put_back_that_is_not_the_units_own(conversation, settings):
    _conversation_with_fact(conversation, settings)
    _archive(conversation, vectors="keep", fulltext="archive")
    chunk = _fact(conversation)
    with pytest.raises(IntegrityError), transaction.atomic():
        Chunk.objects.filter(pk=chunk.pk).update(
            rendered_text="a forged text", summary="", text_archived_at=None
        )
    with transaction.atomic():  # its own text is taken
        Chunk.objects.filter(pk=chunk.pk).update(
            rendered_text=FACT, summary=extractive_summary(FACT), text_archived_at=None
        )
    assert _fact(conversation).rendered_text == FACT


def test_the_admin_shows_a_units_text_read_back_from_the_archive(
    admin_client, conversation, settings
):
    _conversation_with_fact(conversation, settings)
    _archive(conversation, vectors="keep", fulltext="archive")

    response = admin_client.get(f"/admin/memory/chunk/{_fact(conversation).pk}/change/")

    assert response.status_code == 200
    assert FACT in response.content.decode()
