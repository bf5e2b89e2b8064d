"""The text of archived memory units, kept in the archive (docs/retention.md, "Memory of
archived content", `archived_fulltext = archive`).

A unit whose messages are all archived may give up its `rendered_text` and `summary` when
its full-text row is dropped: both are derived from the one archived message it was cut
from, so they are read back from that message through the archive (`hydrate_chunks`), the
way an archived message's own content is. Only a unit the archive gives back exactly
leaves: cut from a single message, whose text at the unit's offsets is the unit's text
(its SHA-256 is the unit's `content_hash`) and whose summary is that text's extractive
summary. Every other unit keeps both columns.

Put back (the policy back at keep or drop, or its messages restored): the text is read from
the message again and checked against `content_hash` before the row takes it (PostgreSQL's
guard trigger checks the hash as well, migration 0006). A unit's text never changes any
other way.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from conversations.archive_port import archived_contents
from conversations.models import Message
from core.bulk_update import update_rows
from memory.chunker import content_hash, extractive_summary
from memory.models import Chunk

_BATCH = 2000


class UnitTextMismatch(RuntimeError):
    """A unit's source message no longer gives back its text: never expected (messages are
    immutable and archive segments are verified on every read); reported, nothing written."""


def _message_texts(conversation_id: int, seqs: Iterable[int]) -> dict[int, str]:
    """`{seq: content}` of the conversation's messages at `seqs`, archived or not (archived
    content through the archive: a missing segment raises its 503)."""
    rows = list(
        Message.objects.filter(conversation_id=conversation_id, seq__in=set(seqs)).values_list(
            "pk", "seq", "content", "archived_in"
        )
    )
    archived = archived_contents(pk for pk, _, _, segment in rows if segment is not None)
    return {
        seq: archived.get(pk, content) if segment is not None else content
        for pk, seq, content, segment in rows
    }


def _source_texts(chunks: list) -> dict[str, str]:
    """`{chunk id: the text its message holds at its offsets}` for single-message chunks
    (`chunks`: objects with pk, conversation_id, seq_start, seq_end and the offsets)."""
    found: dict[str, str] = {}
    by_conversation: dict[int, list] = {}
    for chunk in chunks:
        if chunk.seq_start == chunk.seq_end:
            by_conversation.setdefault(chunk.conversation_id, []).append(chunk)
    for conversation_id, group in by_conversation.items():
        texts = _message_texts(conversation_id, (c.seq_start for c in group))
        for chunk in group:
            text = texts.get(chunk.seq_start)
            if text is not None:
                found[chunk.pk] = text[chunk.start_offset : chunk.end_offset]
    return found


def hydrate_chunks(chunks: Iterable[Chunk]) -> list[Chunk]:
    """Fill in, in place, the text and summary of chunks whose text is in the archive; each
    chunk gets `text_from_archive` (True or False). Returns the chunks."""
    chunks = list(chunks)
    archived = [c for c in chunks if c.text_archived_at is not None]
    for chunk in chunks:
        chunk.text_from_archive = chunk.text_archived_at is not None
    if not archived:
        return chunks
    texts = _source_texts(archived)
    for chunk in archived:
        text = texts.get(chunk.pk)
        if text is None or content_hash(text) != chunk.content_hash:
            raise UnitTextMismatch(
                f"memory unit {chunk.pk}: its message does not give back its text"
            )
        chunk.rendered_text, chunk.summary = text, extractive_summary(text)
    return chunks


def texts_of(rows: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """`(chunk id, rendered_text)` rows with the text of archived-text units filled in (a
    text read from the database is empty exactly for those)."""
    empty = [pk for pk, text in rows if not text]
    if not empty:
        return rows
    chunks = {c.pk: c for c in hydrate_chunks(Chunk.objects.filter(pk__in=empty))}
    return [(pk, text or chunks[pk].rendered_text) for pk, text in rows]


def text_archive(chunks: QuerySet[Chunk]) -> tuple[int, int]:
    """Move the text of `chunks` (archived units: the queryset re-checks, in each UPDATE,
    that their messages are still archived) whose full-text rows are dropped to the archive.
    Returns (units whose text left, units that keep it: not given back exactly)."""
    moved = kept = 0
    pending = chunks.filter(text_archived_at__isnull=True, fulltext_dropped_at__isnull=False)
    for batch in _batches(pending, "rendered_text", "summary"):
        texts = _source_texts(batch)
        exact = [
            c.pk
            for c in batch
            if texts.get(c.pk) == c.rendered_text
            and content_hash(c.rendered_text) == c.content_hash
            and extractive_summary(c.rendered_text) == c.summary
        ]
        kept += len(batch) - len(exact)
        with transaction.atomic(durable=True):
            moved += chunks.filter(pk__in=exact, text_archived_at__isnull=True).update(
                rendered_text="", summary="", text_archived_at=timezone.now()
            )
    return moved, kept


def text_restore(chunks: QuerySet[Chunk]) -> int:
    """Put the text of `chunks` whose text is in the archive back into their rows (read from
    their messages, in the database or the archive, each checked against its hash)."""
    done = 0
    for batch in _batches(chunks.filter(text_archived_at__isnull=False), "text_archived_at"):
        hydrate_chunks(batch)
        done += _write_texts([(c.rendered_text, c.summary, c.pk) for c in batch])
    return done


def _batches(chunks: QuerySet[Chunk], *columns: str):
    """`chunks` in id order, _BATCH at a time, with the columns a text's source needs."""
    after = ""
    while batch := list(
        chunks.filter(pk__gt=after)
        .order_by("pk")
        .only(
            "pk", "conversation_id", "seq_start", "seq_end", "start_offset", "end_offset",
            "content_hash", *columns,
        )[:_BATCH]
    ):  # fmt: skip
        yield batch
        after = batch[-1].pk


def _write_texts(rows: list[tuple[str, str, str]]) -> int:
    """Set (text, summary) of each unit (id) whose text is in the archive, in one short
    transaction (core.bulk_update)."""
    with transaction.atomic(durable=True):
        return update_rows(
            "memory_chunk",
            [("rendered_text", "text"), ("summary", "text"), ("text_archived_at", "timestamptz")],
            [(text, summary, None, pk) for text, summary, pk in rows],
            key=("id", "text"),
            where="memory_chunk.text_archived_at IS NOT NULL",
            batch=_BATCH,
        )
