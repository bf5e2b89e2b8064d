"""Step "memory": memory units (chunks), their vectors and full-text rows are derived
again from the redacted messages; the vectors of regenerated summaries likewise.

The chunks of the scope that cover a redacted message, or whose text the matcher finds,
are deleted with their vectors (and pgvector side rows) under hard delete's permit, and
their messages chunked and embedded again (a turn's chunks by `index_turn`, an API
conversation's units by the same chunker over the same seq ranges). Full-text rows follow
the chunk rows (SQLite triggers; PostgreSQL's generated column). Retrieval records that
named a deleted chunk are pointed at the new chunk over the same messages (or dropped when
none covers them): they hold ids and scores, no text. Summary vectors of regenerated
summaries are deleted and embedded again.
"""

from __future__ import annotations

from bisect import bisect_left

from django.db import transaction

from conversations.archive_port import hydrate_messages
from conversations.models import Message
from memory.indexing import chunk_messages, index_turn, store_chunks
from memory.models import Chunk, ChunkVector, Retrieval, SummaryVector
from memory.summaries import index_summaries
from security.hard_delete import delete_pgvector_rows, hard_delete_permit
from security.redaction.context import JobContext


def affected(ctx: JobContext) -> list[Chunk]:
    """The units covering a redacted message, and those whose text matches. Coverage is
    found per conversation over its units in the redacted range (one condition per message
    would pass SQLite's expression depth once a literal matches a thousand messages)."""
    seqs: dict[int, list[int]] = {}
    for conversation_id, seq in Message.objects.filter(
        pk__in=ctx.row.message_ids or [0]
    ).values_list("conversation_id", "seq"):
        seqs.setdefault(conversation_id, []).append(seq)
    found: dict[int, Chunk] = {}
    for conversation_id, redacted in seqs.items():
        redacted.sort()
        candidates = Chunk.objects.filter(
            conversation_id=conversation_id, seq_start__lte=redacted[-1], seq_end__gte=redacted[0]
        )
        for chunk in candidates.iterator():
            at = bisect_left(redacted, chunk.seq_start)
            if at < len(redacted) and redacted[at] <= chunk.seq_end:
                found[chunk.pk] = chunk
    for chunk in Chunk.objects.filter(conversation_id__in=ctx.row.conversation_ids).iterator():
        if chunk.pk not in found and (
            ctx.matcher.search(chunk.rendered_text) or ctx.matcher.search(chunk.summary)
        ):
            found[chunk.pk] = chunk
    return list(found.values())


def _remove(chunks: list[Chunk], summary_ids: list[str]) -> list[dict]:
    ids = [c.pk for c in chunks]
    kept = list(
        Retrieval.objects.filter(chunk_id__in=ids).values(
            "turn_id", "chunk_id", "similarity", "score", "rank", "packed", "packed_as", "tokens"
        )
    )
    with transaction.atomic(), hard_delete_permit():
        Retrieval.objects.filter(chunk_id__in=ids).delete()
        delete_pgvector_rows(set(ids))
        ChunkVector.objects.filter(chunk_id__in=ids)._raw_delete("default")
        Chunk.objects.filter(pk__in=ids)._raw_delete("default")
        SummaryVector.objects.filter(summary_id__in=summary_ids)._raw_delete("default")
    return kept


def _reindex(chunks: list[Chunk]) -> None:
    turns = {c.source_turn_id for c in chunks if c.source_key.startswith("turn:")}
    for turn_id in sorted(t for t in turns if t):
        index_turn(turn_id=turn_id)
    for chunk in chunks:
        if chunk.source_key.startswith("turn:"):
            continue
        if Chunk.objects.filter(source_key=chunk.source_key).exists():
            continue  # re-chunked already with another chunk of the same range
        messages = hydrate_messages(
            Message.objects.filter(
                conversation_id=chunk.conversation_id,
                seq__gte=chunk.seq_start,
                seq__lte=chunk.seq_end,
            )
            .prefetch_related("parts")
            .order_by("seq")
        )
        specs = chunk_messages(messages, units=True)
        store_chunks(
            specs,
            source_key=None,
            conversation_id=chunk.conversation_id,
            created_at_by_seq={m.seq: m.created_at for m in messages},
        )


def _repoint(kept: list[dict], old: dict[str, Chunk]) -> int:
    restored = 0
    for row in kept:
        chunk = old[row.pop("chunk_id")]
        new = (
            Chunk.objects.filter(
                conversation_id=chunk.conversation_id,
                seq_start__lte=chunk.seq_end,
                seq_end__gte=chunk.seq_start,
            )
            .exclude(pk__in=Retrieval.objects.filter(turn_id=row["turn_id"]).values("chunk_id"))
            .order_by("seq_start")
            .first()
        )
        if new is not None:
            Retrieval.objects.create(chunk=new, **row)
            restored += 1
    return restored


def run(ctx: JobContext) -> dict:
    """One transaction: a crash leaves the old units, and the step runs again whole."""
    with transaction.atomic():
        chunks = affected(ctx)
        summary_ids = ctx.row.steps.get("summaries", {}).get("ids", [])
        kept = _remove(chunks, summary_ids)
        _reindex(chunks)
        repointed = _repoint(kept, {c.pk: c for c in chunks})
        summary_vectors = 0
        for conversation_id in ctx.row.conversation_ids:
            summary_vectors += index_summaries(conversation_id=conversation_id)
    return {
        "chunks_rederived": len(chunks),
        "retrievals_repointed": repointed,
        "summary_vectors": summary_vectors,
    }
