"""Indexing (SRD 6.3 TX-C, 9): chunk a turn's or a conversation's messages, embed the
chunks, and store chunks and vectors idempotently.

- `index_turn(turn_id=...)`: the turn engine's index_turn job. Reads the turn's messages
  as mirrored into its branch's conversation (external ids `turn:<id>:...`), so chunks
  carry the message seq range that branch ancestry filters on. Raises when the turn is
  not mirrored yet or anything fails: the job records "index degraded" and retries.
- `index_conversation_messages(conversation_id=...)`: messages ingested through the
  messages API, after a cursor advanced by compare-and-set in the chunks' transaction.
  Conversations that back a turn branch are left to `index_turn`.

Embedding happens before the write transaction (it may be a network call); the write is
one short transaction. Re-running either is a no-op: chunk rows are unique by (source
key, type, hash) and vectors by (chunk, namespace); conflicts are ignored, then the
stored ids are read back.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

import numpy as np
from django.conf import settings
from django.db import connection, transaction
from django.db.models import QuerySet
from django.utils import timezone

from conversations.archive_port import hydrate_messages
from conversations.models import Message, PartType, Role
from conversations.search.query import as_datetime
from memory import tool_output_policy
from memory.chunker import ChunkingOptions, ChunkSpec, Segment, chunk_segments, unit_segments
from memory.embeddings import EmbeddingBackend, EmbeddingError, backend_for
from memory.models import Chunk, ChunkVector, EmbeddingNamespace, MessageIndexCursor
from memory.namespaces import backend_for_namespace, write_namespaces

logger = logging.getLogger("lcm.memory")

TASK = "memory.tasks.index_conversation"


class IndexingError(Exception):
    pass


@dataclass(frozen=True)
class IndexResult:
    chunks_created: int
    vectors_created: int
    chunks_total: int


def chunking_options() -> ChunkingOptions:
    return ChunkingOptions(
        min_tokens=settings.LCM_CHUNK_MIN_TOKENS,
        max_tokens=settings.LCM_CHUNK_MAX_TOKENS,
        overlap_tokens=settings.LCM_CHUNK_OVERLAP_TOKENS,
        topic_shift=settings.LCM_CHUNK_TOPIC_SHIFT,
    )


def _topic_embedder():
    """Topic shifts are judged with the bundled static model whatever the search model is,
    so the same messages always cut into the same chunks (a retry after a model change
    must not produce different chunks). Without it, no topic-shift cuts."""
    try:
        backend = backend_for("static", "")
        backend.embed(["probe"])
    except EmbeddingError:
        return None
    return backend.embed


def with_parts(messages: QuerySet[Message]) -> list[Message]:
    """The messages with their parts (in ordinal order: the model's ordering) and their
    archived content read back: what indexing reads."""
    return hydrate_messages(messages.prefetch_related("parts"))


def part_ordinals(message_ids: Sequence[int]) -> dict[int, list[int]]:
    """Indexing's reader, for the integrity check `part_reader_disorder`."""
    messages = with_parts(Message.objects.filter(pk__in=message_ids).order_by("seq"))
    return {m.pk: [p.ordinal for p in m.parts.all()] for m in messages}


def segments_for(messages: Sequence[Message]) -> list[Segment]:
    """One segment per message; a message made of tool results is a tool-result segment."""
    segments = []
    for message in messages:
        parts = list(message.parts.all()) if hasattr(message, "parts") else []
        tool_results = [
            p
            for p in parts
            if p.part_type == PartType.TOOL and p.tool_status in ("completed", "error")
        ]
        is_tool = (
            message.role == Role.TOOL
            or (bool(tool_results) and len(tool_results) == len(parts))
            or (message.external_id or "").endswith(":tool_results")
        )
        segments.append(
            Segment(
                text=message.content,
                role="tool" if is_tool else message.role,
                seq=message.seq,
                is_tool_result=is_tool,
            )
        )
    return segments


def chunk_messages(messages: Sequence[Message], *, units: bool = False) -> list[ChunkSpec]:
    """The 200-800-token semantic chunks (a turn's: what turn injection packs), or with
    `units` and LCM_MEMORY_UNIT_TOKENS > 0 search units (one per short message, passages
    of long ones; docs/memory.md), which messages ingested through the API get."""
    if units and settings.LCM_MEMORY_UNIT_TOKENS > 0:
        segments = segments_for(messages)
        cut = unit_segments(segments, unit_tokens=settings.LCM_MEMORY_UNIT_TOKENS)
        return tool_output_policy.apply(
            cut, segments, limit=settings.LCM_MEMORY_EMBED_TOOL_RESULT_TOKENS
        )
    return chunk_segments(
        segments_for(messages), options=chunking_options(), embed=_topic_embedder()
    )


def store_chunks(
    specs: Sequence[ChunkSpec],
    *,
    source_key: str | None,
    conversation_id: int,
    created_at_by_seq: dict,
    session_id: str | None = None,
    branch_id: str | None = None,
    source_turn_id: str | None = None,
    cursor_advance: tuple[int, int] | None = None,
    vectors: dict[int, np.ndarray] | None = None,
) -> IndexResult:
    """Embed `specs` into every write namespace (unless their `vectors` are given), then
    store chunks and vectors in one transaction (with the message cursor's compare-and-set
    when given)."""
    if vectors is None:
        vectors = _embed_all(list(specs))
    keys = [
        source_key or f"msg:{conversation_id}:{spec.seq_start}-{spec.seq_end}" for spec in specs
    ]
    with transaction.atomic():
        if cursor_advance is not None and not _cursor_moved(conversation_id, *cursor_advance):
            return IndexResult(0, 0, 0)  # another worker indexed this range first
        origin = {
            "conversation_id": conversation_id,
            "session_id": session_id,
            "branch_id": branch_id,
            "source_turn_id": source_turn_id,
        }
        rows = [
            _chunk_row(spec, key, origin, created_at_by_seq[spec.seq_end])
            for key, spec in zip(keys, specs, strict=True)
        ]
        created = _insert_new(Chunk, rows, Chunk.objects.filter(source_key__in=set(keys)))
        stored = _stored_ids(keys, specs)
        vector_rows = [
            ChunkVector(
                namespace_id=ns_id,
                chunk_id=stored[(key, spec.chunk_type, spec.content_hash)],
                vector=matrix[i].astype("<f4").tobytes(),
            )
            for ns_id, matrix in vectors.items()
            for i, (key, spec) in enumerate(zip(keys, specs, strict=True))
        ]
        vectors_created = _insert_new(
            ChunkVector,
            vector_rows,
            ChunkVector.objects.filter(chunk_id__in={row.chunk_id for row in vector_rows}),
        )
    return IndexResult(created, vectors_created, len(specs))


def _cursor_moved(conversation_id: int, old: int, new: int) -> bool:
    """Compare-and-set of the conversation's message cursor from `old` to `new`."""
    moved = MessageIndexCursor.objects.filter(conversation_id=conversation_id, last_seq=old).update(
        last_seq=new, updated_at=timezone.now()
    )
    return moved == 1


def _chunk_row(spec: ChunkSpec, key: str, origin: dict, source_created_at) -> Chunk:
    return Chunk(
        **origin,
        source_key=key,
        seq_start=spec.seq_start,
        seq_end=spec.seq_end,
        start_offset=spec.start_offset,
        end_offset=spec.end_offset,
        chunk_type=spec.chunk_type,
        rendered_text=spec.rendered_text,
        summary=spec.summary,
        token_est=spec.token_est,
        content_hash=spec.content_hash,
        source_created_at=source_created_at,
        lexical_only=None if spec.embedded else True,
    )


def _insert_new(model, rows: list, existing: QuerySet) -> int:
    """Insert `rows`, skipping any already stored; returns how many were new (`existing`,
    the rows they could clash with, counted before and after)."""
    before = existing.count()
    model.objects.bulk_create(rows, ignore_conflicts=True, batch_size=500)
    return existing.count() - before


def embed_units(backend: EmbeddingBackend, namespace: EmbeddingNamespace, specs) -> np.ndarray:
    """One row per unit: its vector, or zeros for a lexical-only one (`embedded` false,
    memory.tool_output_policy). The zero row keeps the unit in the search matrix, whose
    BM25 leg finds it by its words, while its cosine to any query is 0."""
    matrix = np.zeros((len(specs), namespace.dim), dtype=np.float32)
    rows = [i for i, spec in enumerate(specs) if spec.embedded]
    if rows:
        matrix[rows] = _embed(backend, namespace, [specs[i].rendered_text for i in rows])
    return matrix


def _embed(backend: EmbeddingBackend, namespace: EmbeddingNamespace, texts: list[str]):
    if not texts:
        return np.zeros((0, namespace.dim), dtype=np.float32)
    matrix = backend.embed(texts)
    if matrix.shape != (len(texts), namespace.dim):
        raise IndexingError(
            f"embedding model {namespace.model} returned {matrix.shape}, "
            f"expected {(len(texts), namespace.dim)}"
        )
    return matrix


def _stored_ids(keys: list[str], specs: Sequence[ChunkSpec]) -> dict[tuple[str, str, str], str]:
    """(source key, type, hash) -> stored chunk id, for every spec (new or pre-existing)."""
    wanted = {(k, s.chunk_type, s.content_hash) for k, s in zip(keys, specs, strict=True)}
    found = {}
    for pk, key, chunk_type, digest in Chunk.objects.filter(source_key__in=set(keys)).values_list(
        "id", "source_key", "chunk_type", "content_hash"
    ):
        if (key, chunk_type, digest) in wanted:
            found[(key, chunk_type, digest)] = pk
    return found


# ---------------------------------------------------------------------------------------
# turns


def index_turn(*, turn_id: str) -> IndexResult:
    """Chunk and embed one committed turn (its user, assistant and tool messages)."""
    from turns.models import UserTurn
    from turns.selectors import offline_authored_external_ids

    turn = UserTurn.objects.select_related("branch").get(pk=turn_id)
    messages = with_parts(  # archived content is indexed from its segment
        Message.objects.filter(
            conversation_id=turn.branch.conversation_id,
            external_id__startswith=f"turn:{turn_id}:",
        ).order_by("seq")
    )
    if not messages:
        raise IndexingError(f"turn {turn_id} has no mirrored messages yet; retry later")
    # What the offline provider wrote is not memory (turns/selectors.py says why).
    offline = offline_authored_external_ids(turn_id=turn_id)
    specs = chunk_messages([m for m in messages if m.external_id not in offline])
    result = store_chunks(
        specs,
        source_key=f"turn:{turn_id}",
        conversation_id=turn.branch.conversation_id,
        created_at_by_seq={m.seq: m.created_at for m in messages},
        session_id=turn.session_id,
        branch_id=turn.branch_id,
        source_turn_id=turn.pk,
    )
    logger.debug("indexed turn %s: %s", turn_id, result)
    return result


# ---------------------------------------------------------------------------------------
# messages API conversations

_MESSAGE_BATCH = 2000


@dataclass
class _Pending:
    """One conversation's messages after its cursor, cut into units."""

    conversation_id: int
    last_seq: int
    messages: list
    specs: list[ChunkSpec]


def index_conversation_messages(*, conversation_id: int) -> IndexResult:
    """The indexing job: index the conversation's messages after the cursor, and with them
    those of other conversations whose job is queued and not started yet (up to
    LCM_MEMORY_INDEX_BATCH_CONVERSATIONS in all), their units embedded in one call per
    namespace (a burst of appends over several conversations is one job; their own jobs
    then find nothing to do). Idempotent: each conversation's cursor moves by
    compare-and-set in its chunks' transaction, so every message is indexed once."""
    others = _queued_conversations(conversation_id, settings.LCM_MEMORY_INDEX_BATCH_CONVERSATIONS)
    return index_conversations([conversation_id, *others])


def _queued_conversations(conversation_id: int, limit: int) -> list[int]:
    """Up to `limit` - 1 other conversations marked queued (oldest mark first)."""
    if limit <= 1:
        return []
    return list(
        MessageIndexCursor.objects.filter(queued_at__isnull=False)
        .exclude(conversation_id=conversation_id)
        .order_by("queued_at")
        .values_list("conversation_id", flat=True)[: limit - 1]
    )


def index_conversations(conversation_ids: Sequence[int]) -> IndexResult:
    """Index these conversations' messages after their cursors, in rounds of up to
    _MESSAGE_BATCH messages in all (shared evenly), one embedding call per namespace and
    round."""
    from turns.models import Branch

    # a chat branch's conversation: index_turn owns its chunks
    branched = set(
        Branch.objects.filter(conversation_id__in=conversation_ids).values_list(
            "conversation_id", flat=True
        )
    )
    ids = [c for c in dict.fromkeys(conversation_ids) if c not in branched]
    for conversation_id in ids:
        MessageIndexCursor.objects.get_or_create(conversation_id=conversation_id)
    # Cleared before reading: an append committed from here on queues a new job.
    MessageIndexCursor.objects.filter(conversation_id__in=ids).update(queued_at=None)
    total = IndexResult(0, 0, 0)
    share = max(1, _MESSAGE_BATCH // max(1, len(ids)))
    while pending := [p for p in (_pending(c, share) for c in ids) if p.messages]:
        vectors = _embed_all([spec for p in pending for spec in p.specs])
        start = 0
        for p in pending:
            end = start + len(p.specs)
            result = store_chunks(
                p.specs,
                source_key=None,
                conversation_id=p.conversation_id,
                created_at_by_seq={m.seq: m.created_at for m in p.messages},
                cursor_advance=(p.last_seq, p.messages[-1].seq),
                vectors={ns: matrix[start:end] for ns, matrix in vectors.items()},
            )
            start = end
            total = IndexResult(
                total.chunks_created + result.chunks_created,
                total.vectors_created + result.vectors_created,
                total.chunks_total + result.chunks_total,
            )
    return total


def _pending(conversation_id: int, limit: int) -> _Pending:
    """Up to `limit` of the conversation's messages after its cursor, cut into units."""
    cursor = MessageIndexCursor.objects.get(conversation_id=conversation_id)
    messages = with_parts(  # archived content is indexed from its segment
        Message.objects.filter(conversation_id=conversation_id, seq__gt=cursor.last_seq).order_by(
            "seq"
        )[:limit]
    )
    specs = chunk_messages(messages, units=True) if messages else []
    return _Pending(conversation_id, cursor.last_seq, messages, specs)


def _embed_all(specs: list[ChunkSpec]) -> dict[int, np.ndarray]:
    """The units' vectors in every write namespace (namespace id -> matrix)."""
    return {ns.pk: embed_units(backend_for_namespace(ns), ns, specs) for ns in write_namespaces()}


# A job queued longer ago than this is presumed lost (broker restart, purged queue), so the
# next append queues another one.
QUEUED_JOB_STALE_AFTER = timedelta(minutes=10)


_CURSOR = MessageIndexCursor._meta.db_table
# One statement (it runs after every API append): create the cursor marked "queued", or
# mark an existing one whose mark is clear or stale; a row comes back only if this caller
# set the mark. PostgreSQL and SQLite (3.35+) both speak this upsert with RETURNING.
_CLAIM_SQL = (
    f"INSERT INTO {_CURSOR} (conversation_id, last_seq, queued_at, updated_at)"
    " VALUES (%s, 0, %s, %s)"
    " ON CONFLICT (conversation_id) DO UPDATE SET queued_at = excluded.queued_at"
    f" WHERE {_CURSOR}.queued_at IS NULL OR {_CURSOR}.queued_at < %s"
    " RETURNING conversation_id"
)


# Read first: while a job is queued (the common case under steady ingest) the answer is
# no, and a plain read writes nothing, whereas the upsert's ON CONFLICT locks the row even
# when its WHERE refuses the update: on PostgreSQL a row lock is a WAL record, and the
# commit then waits for the disk (0.6 ms per append here).
_QUEUED_SQL = f"SELECT queued_at FROM {_CURSOR} WHERE conversation_id = %s"


def _claim_queue_slot(conversation_id: int) -> bool:
    """True when this caller should queue the conversation's indexing job: no job is
    queued and not yet started (compare-and-set on the cursor row, safe across processes)."""
    now = timezone.now()
    stale = now - QUEUED_JOB_STALE_AFTER
    with connection.cursor() as cursor:
        cursor.execute(_QUEUED_SQL, [conversation_id])
        row = cursor.fetchone()
        if row is not None and row[0] is not None and as_datetime(row[0]) >= stale:
            return False
        adapt = connection.ops.adapt_datetimefield_value
        cursor.execute(_CLAIM_SQL, [conversation_id, adapt(now), adapt(now), adapt(stale)])
        return cursor.fetchone() is not None


def schedule_after_append(conversation_id: int) -> None:
    """The ingest hook (on commit): queue a background indexing job. Never raises."""
    if not settings.LCM_MEMORY_INDEX_MESSAGES:
        return
    try:
        from django_q.tasks import async_task

        if not _claim_queue_slot(conversation_id):
            return  # a queued job has not started yet: it will index this append too
        async_task(TASK, conversation_id, sync=bool(settings.Q_CLUSTER.get("sync", False)))
    except Exception:
        logger.exception("queueing memory indexing failed for conversation %s", conversation_id)
