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
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from django.conf import settings
from django.db import connection, transaction
from django.db.models import OuterRef, QuerySet, Subquery
from django.utils import timezone

from conversations.archive_port import hydrate_messages
from conversations.models import Conversation, Message, PartType, Role
from core.leases import lease_deadline, lease_kept
from memory import index_queue, tool_output_policy
from memory.chunker import ChunkingOptions, ChunkSpec, Segment, chunk_segments, unit_segments
from memory.embeddings import EmbeddingBackend, EmbeddingError, backend_for
from memory.models import Chunk, ChunkVector, EmbeddingNamespace, MessageIndexCursor
from memory.namespaces import backend_for_namespace, write_namespaces

logger = logging.getLogger("lcm.memory")


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
        created = _insert_new(Chunk, rows)
        # Every row new: the ids it was given are the stored ones; else read them back.
        stored = (
            {
                (key, row.chunk_type, row.content_hash): row.pk
                for key, row in zip(keys, rows, strict=True)
            }
            if created == len(rows)
            else _stored_ids(keys, specs)
        )
        vector_rows = [
            ChunkVector(
                namespace_id=ns_id,
                chunk_id=stored[(key, spec.chunk_type, spec.content_hash)],
                vector=matrix[i].astype("<f4").tobytes(),
            )
            for ns_id, matrix in vectors.items()
            for i, (key, spec) in enumerate(zip(keys, specs, strict=True))
        ]
        vectors_created = _insert_new(ChunkVector, vector_rows)
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


def _insert_new(model, rows: list) -> int:
    """Insert `rows`, skipping any already stored (`ON CONFLICT DO NOTHING`, which
    PostgreSQL and SQLite both speak); returns how many were new. One statement per 500
    rows with the values as they are (only datetimes adapted): Django's bulk_create spent
    more time preparing each field's value than the database spent storing them."""
    if not rows:
        return 0
    now = timezone.now()
    fields = [f for f in model._meta.concrete_fields if not f.primary_key or f.has_default()]
    for row in rows:
        for field in fields:
            if getattr(field, "auto_now_add", False) and getattr(row, field.attname) is None:
                setattr(row, field.attname, now)
    adapt = connection.ops.adapt_datetimefield_value
    dated = {f.attname for f in fields if f.get_internal_type() == "DateTimeField"}
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    created = 0
    with connection.cursor() as cursor:
        for start in range(0, len(rows), 500):
            batch = rows[start : start + 500]
            values = ", ".join(["(" + ", ".join(["%s"] * len(fields)) + ")"] * len(batch))
            params = [
                adapt(value) if f.attname in dated else value
                for row in batch
                for f in fields
                for value in (getattr(row, f.attname),)
            ]
            cursor.execute(
                f"INSERT INTO {model._meta.db_table} ({columns}) VALUES {values}"
                " ON CONFLICT DO NOTHING",
                params,
            )
            created += cursor.rowcount
    return created


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

# A round reads at most this many messages of one conversation and this many tokens in
# all (shared evenly between the conversations of the job), so a round's embedding takes
# seconds and a job's memory stays bounded; a backlog takes several rounds.
_MESSAGE_BATCH = 2000
_ROUND_TOKENS = 16_000


@dataclass
class _Pending:
    """One conversation's messages after its cursor, cut into units."""

    conversation_id: int
    last_seq: int
    messages: list
    specs: list[ChunkSpec]


def index_conversation_messages(*, conversation_id: int, seconds: float | None = None):
    """Index the conversation's messages after its cursor, and with them those of other
    conversations whose job is queued and not started, as long as the round has room (up
    to LCM_MEMORY_INDEX_BATCH_CONVERSATIONS in all): their units are embedded in one call
    per namespace. The job holds a lease on each conversation it takes (renewed while it
    works), so another job leaves them alone; after `seconds` (the background job passes
    LCM_MEMORY_INDEX_JOB_SECONDS; None: run to the end) it starts no new round. Whatever
    is still behind when it lets go is queued again, so a conversation is never left
    behind by a job that stopped early; one whose job failed is queued again by the
    worker's reconciler once the lease is free (memory.index_lag). Idempotent: each
    conversation's cursor moves by compare-and-set in its chunks' transaction."""
    claimed = _claim(conversation_id)
    if not claimed:
        return IndexResult(0, 0, 0)  # another job holds it: it queues what it leaves
    deadline = None if seconds is None else time.monotonic() + seconds
    finished = False
    try:
        with lease_kept(MessageIndexCursor.objects.filter(conversation_id__in=claimed)):
            total = _index_rounds(claimed, deadline)
        finished = True
    finally:
        behind = _release(claimed)
        if finished and behind:
            index_queue.requeue(behind)
    return total


def _claim(conversation_id: int) -> list[int]:
    """Take the conversation (and other queued ones while a round has room) for this job:
    each lease is a compare-and-set, and clears the queued mark, so an append from here
    on queues a new job. [] when another job holds the conversation, or it backs a chat
    branch (index_turn owns those chunks)."""
    from turns.models import Branch

    if Branch.objects.filter(conversation_id=conversation_id).exists():
        MessageIndexCursor.objects.filter(conversation_id=conversation_id).update(queued_at=None)
        return []
    MessageIndexCursor.objects.get_or_create(conversation_id=conversation_id)
    if not _lease([conversation_id]):
        return []
    claimed = [conversation_id]
    room = _ROUND_TOKENS - _pending_tokens([conversation_id]).get(conversation_id, 0)
    limit = settings.LCM_MEMORY_INDEX_BATCH_CONVERSATIONS - 1
    if room > 0 and limit > 0:
        others = _queued_conversations(conversation_id, limit)
        branched = set(
            Branch.objects.filter(conversation_id__in=others).values_list(
                "conversation_id", flat=True
            )
        )
        tokens = _pending_tokens([c for c in others if c not in branched])
        taken = []
        for other in others:
            if other in branched or room <= 0:
                continue
            taken.append(other)
            room -= tokens.get(other, 0)
        claimed += _lease(taken)
    return claimed


def _lease(conversation_ids: list[int]) -> list[int]:
    """The conversations whose lease this job took (free or lapsed ones)."""
    now = timezone.now()
    taken = []
    for conversation_id in conversation_ids:
        if (
            MessageIndexCursor.objects.filter(conversation_id=conversation_id)
            .exclude(lease_until__gte=now)
            .update(lease_until=lease_deadline(now), queued_at=None)
        ):
            taken.append(conversation_id)
    return taken


def _queued_conversations(conversation_id: int, limit: int) -> list[int]:
    """Up to `limit` other conversations marked queued and not leased (oldest mark first)."""
    return list(
        MessageIndexCursor.objects.filter(queued_at__isnull=False)
        .exclude(conversation_id=conversation_id)
        .exclude(lease_until__gte=timezone.now())
        .order_by("queued_at")
        .values_list("conversation_id", flat=True)[:limit]
    )


_MESSAGES = Message._meta.db_table
_CURSORS = MessageIndexCursor._meta.db_table


def _pending_tokens(conversation_ids: list[int]) -> dict[int, int]:
    """Tokens of each conversation's messages after its cursor (only those with any)."""
    if not conversation_ids:
        return {}
    marks = ", ".join(["%s"] * len(conversation_ids))
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT m.conversation_id, SUM(m.token_count) FROM {_MESSAGES} m"
            f" JOIN {_CURSORS} c ON c.conversation_id = m.conversation_id"
            f" WHERE m.conversation_id IN ({marks}) AND m.seq > c.last_seq"
            " GROUP BY m.conversation_id",
            list(conversation_ids),
        )
        return {conversation_id: int(tokens) for conversation_id, tokens in cursor.fetchall()}


def _release(conversation_ids: list[int]) -> list[int]:
    """Give the leases back and return the conversations still behind; those caught up
    are no longer behind (`behind_since` cleared). Released first, checked after: an
    append committed in between is either seen here or queues its own job."""
    MessageIndexCursor.objects.filter(conversation_id__in=conversation_ids).update(lease_until=None)
    behind = set(
        MessageIndexCursor.objects.filter(
            conversation_id__in=conversation_ids,
            last_seq__lt=Subquery(
                Conversation.objects.filter(pk=OuterRef("conversation_id")).values("last_seq")
            ),
        ).values_list("conversation_id", flat=True)
    )
    MessageIndexCursor.objects.filter(conversation_id__in=conversation_ids).exclude(
        conversation_id__in=behind
    ).update(behind_since=None)
    return [c for c in conversation_ids if c in behind]


def _index_rounds(conversation_ids: list[int], deadline: float | None) -> IndexResult:
    """Rounds of up to _ROUND_TOKENS tokens (shared evenly), one embedding call per
    namespace and round, until nothing is left or the deadline has passed (after the
    first round: a job always moves its conversations on)."""
    total = IndexResult(0, 0, 0)
    active = list(conversation_ids)
    while active:
        share = max(1, _ROUND_TOKENS // len(active))
        pending = [p for p in (_pending(c, share) for c in active) if p.messages]
        if not pending:
            break
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
        active = [p.conversation_id for p in pending]
        if deadline is not None and time.monotonic() >= deadline:
            break
    return total


def _pending(conversation_id: int, tokens: int) -> _Pending:
    """The conversation's next messages after its cursor, up to `tokens` in all (at least
    one) and _MESSAGE_BATCH, cut into units."""
    cursor = MessageIndexCursor.objects.get(conversation_id=conversation_id)
    after = Message.objects.filter(conversation_id=conversation_id, seq__gt=cursor.last_seq)
    last, running = None, 0
    for seq, count in after.order_by("seq").values_list("seq", "token_count")[:_MESSAGE_BATCH]:
        if last is not None and running + count > tokens:
            break
        last, running = seq, running + count
    if last is None:
        return _Pending(conversation_id, cursor.last_seq, [], [])
    messages = with_parts(  # archived content is indexed from its segment
        after.filter(seq__lte=last).order_by("seq")
    )
    specs = chunk_messages(messages, units=True) if messages else []
    return _Pending(conversation_id, cursor.last_seq, messages, specs)


def _embed_all(specs: list[ChunkSpec]) -> dict[int, np.ndarray]:
    """The units' vectors in every write namespace (namespace id -> matrix)."""
    return {ns.pk: embed_units(backend_for_namespace(ns), ns, specs) for ns in write_namespaces()}
