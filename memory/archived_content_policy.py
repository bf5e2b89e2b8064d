"""Retention's policy for the semantic memory of archived content (docs/retention.md,
"Memory of archived content"): what becomes of the vectors, full-text rows and text of
memory units whose messages are archived. The `archive` app stores the messages' content;
this module only shrinks the memory derived from it (the units' text: memory.archived_unit_text).

A chunk is *archived* when every message it was cut from is archived (`archived_in` set).
Retention's policy then may:

- compress its vectors (`archived_vectors`: keep | float16 | int8; memory.vectors.codec):
  a vector is only ever made smaller (float32 -> float16 -> int8), never re-widened by a
  policy change, because that would not bring the lost precision back;
- drop its full-text row (`archived_fulltext`: keep | drop | archive;
  `Chunk.fulltext_dropped_at`, migration 0005). Exact both ways: a policy back at `keep`
  puts the rows back;
- with `archive`, also move its text (`rendered_text`, `summary`) to the archive: read
  back from its archived message by every reader (memory.archived_unit_text, migration 0006).
  The unit cache then holds no terms for it (memory.recall's BM25 leg and speakers no
  longer match it; its vector still does), and each hit whose text is in the archive
  costs a segment read (cached). Exact both ways: a policy back at `keep` or `drop` puts
  the text back, checked against the unit's hash.

Restore (`archived_memory_expand`) puts the text and the full-text rows of chunks that are
no longer archived back and rewrites their vectors as float32: the values are the
compressed ones widened (vectors are derived data; re-embedding is `manage.py lcm_memory
reindex`).

Both steps are idempotent and re-check the archived state in the UPDATE itself, so a step
that crashed is completed by the next run, and a compression never writes to a unit whose
messages were restored before its statement began. A compression whose statement overlaps a
restore's own memory step can still leave a restored unit compressed (the restore listed
its vectors before the compression committed): running the restore again over the range
widens it (restore is not a hot path; it runs from `lcm_retention restore`).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection, transaction
from django.db.models import Exists, F, OuterRef, QuerySet
from django.db.models.functions import Length
from django.utils import timezone

from conversations.models import Message
from core.bulk_update import update_rows
from memory.archived_unit_text import text_archive, text_restore
from memory.models import Chunk, ChunkVector
from memory.vectors.codec import FLOAT16, FLOAT32, INT8, recode_vector, stored_length

VECTOR_POLICIES = ("keep", FLOAT16, INT8)
FULLTEXT_POLICIES = ("keep", "drop", "archive")
_BATCH = 2000
_LIVE_SQL = (
    "NOT EXISTS (SELECT 1 FROM conversations_message m "
    "WHERE m.conversation_id = c.conversation_id AND m.seq >= c.seq_start "
    "AND m.seq <= c.seq_end AND m.archived_in IS NULL)"
)


@dataclass
class MemoryResult:
    vectors_compressed: int = 0
    vectors_expanded: int = 0
    fulltext_dropped: int = 0
    fulltext_restored: int = 0
    text_archived: int = 0
    text_kept: int = 0  # archived units whose text the archive cannot give back exactly
    text_restored: int = 0

    def add(self, other: MemoryResult) -> None:
        for name, value in other.__dict__.items():
            setattr(self, name, getattr(self, name) + value)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def _live_messages():
    return Message.objects.filter(
        conversation_id=OuterRef("conversation_id"),
        seq__gte=OuterRef("seq_start"),
        seq__lte=OuterRef("seq_end"),
        archived_in__isnull=True,
    )


def archived_chunks(*, conversation_id: int) -> QuerySet[Chunk]:
    """Chunks of the conversation all of whose messages are archived."""
    return Chunk.objects.filter(conversation_id=conversation_id).exclude(Exists(_live_messages()))


def _with_length(queryset: QuerySet[ChunkVector]) -> QuerySet[ChunkVector]:
    return queryset.annotate(stored=Length("vector"), dim=F("namespace__dim"))


def _rewrite(rows: list[tuple[bytes, int]], *, archived: bool) -> int:
    """Set each vector (blob, id), only while its chunk is (archived=True) or is not (False)
    archived, re-checked in the statement; one short transaction and one statement per batch
    (core.bulk_update)."""
    condition = _LIVE_SQL if archived else f"NOT ({_LIVE_SQL})"
    check = (
        "EXISTS (SELECT 1 FROM memory_chunk c "
        f"WHERE c.id = memory_chunkvector.chunk_id AND {condition})"
    )
    done = 0
    for start in range(0, len(rows), _BATCH):
        with transaction.atomic(durable=True):
            done += update_rows(
                "memory_chunkvector", [("vector", "bytea")], rows[start : start + _BATCH],
                where=check, batch=_BATCH,
            )  # fmt: skip
    return done


def archived_memory_compress(
    *, conversation_id: int, vectors: str = "keep", fulltext: str = "keep"
) -> MemoryResult:
    """Bring the archived chunks of a conversation to the policy (see the module doc)."""
    if vectors not in VECTOR_POLICIES or fulltext not in FULLTEXT_POLICIES:
        raise ValueError(f"unknown policy vectors={vectors!r} fulltext={fulltext!r}")
    result = MemoryResult()
    chunks = archived_chunks(conversation_id=conversation_id)
    if fulltext != "archive":  # the text first: a full-text row is made from it
        result.text_restored = text_restore(chunks)
    if fulltext in ("drop", "archive"):
        with transaction.atomic(durable=True):
            result.fulltext_dropped = Chunk.objects.filter(
                pk__in=chunks.filter(fulltext_dropped_at__isnull=True)
            ).update(fulltext_dropped_at=timezone.now())
        if fulltext == "archive":
            result.text_archived, result.text_kept = text_archive(chunks)
    else:
        with transaction.atomic(durable=True):
            result.fulltext_restored = Chunk.objects.filter(
                pk__in=chunks.filter(fulltext_dropped_at__isnull=False)
            ).update(fulltext_dropped_at=None)
    if vectors != "keep":
        per, header = {FLOAT16: (2, 4), INT8: (1, 8)}[vectors]  # codec.stored_length
        candidates = _with_length(ChunkVector.objects.filter(chunk__in=chunks)).exclude(
            stored=F("dim") * per + header
        )
        rows = [
            (recode_vector(blob, dim, vectors), pk)
            for pk, blob, dim in candidates.values_list("pk", "vector", "dim").iterator(2000)
            if len(bytes(blob)) > stored_length(vectors, dim)
        ]
        result.vectors_compressed = _rewrite(rows, archived=True)
    if result.fulltext_dropped:
        fulltext_optimize()
    return result


def archived_memory_expand(*, conversation_id: int, seq_from: int, seq_to: int) -> MemoryResult:
    """After a restore of [seq_from, seq_to]: chunks overlapping it that are no longer
    archived get their full-text rows back and float32 vectors."""
    result = MemoryResult()
    chunks = (
        Chunk.objects.filter(conversation_id=conversation_id, seq_end__gte=seq_from)
        .filter(seq_start__lte=seq_to)
        .filter(Exists(_live_messages()))
    )
    result.text_restored = text_restore(chunks)
    with transaction.atomic(durable=True):
        result.fulltext_restored = Chunk.objects.filter(
            pk__in=chunks.filter(fulltext_dropped_at__isnull=False)
        ).update(fulltext_dropped_at=None)
    candidates = _with_length(ChunkVector.objects.filter(chunk__in=chunks)).exclude(
        stored=F("dim") * 4
    )
    rows = [
        (recode_vector(blob, dim, FLOAT32), pk)
        for pk, blob, dim in candidates.values_list("pk", "vector", "dim").iterator(2000)
    ]
    result.vectors_expanded = _rewrite(rows, archived=False)
    return result


def fulltext_optimize() -> None:
    """SQLite: merge the FTS5 index so the deleted rows' space is freed (PostgreSQL's GIN
    index drops NULL tsvectors itself; VACUUM reclaims the space)."""
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("INSERT INTO memory_chunk_fts(memory_chunk_fts) VALUES ('optimize')")
