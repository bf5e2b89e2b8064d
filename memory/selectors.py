"""Reads of the memory app: a branch's chunks (the chunk browser)."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from memory.archived_unit_text import hydrate_chunks
from memory.fulltext import search_chunks
from memory.models import Chunk
from memory.turn_retrieval import scope_for_branch


def _ancestry_q(branch) -> Q:
    condition = Q(pk__in=[])
    for conversation_id, limit in scope_for_branch(branch).conversations or ():
        part = Q(conversation_id=conversation_id)
        if limit is not None:
            part &= Q(seq_end__lte=limit)
        condition |= part
    return condition


def branch_chunks(*, branch, q: str = "", limit: int = 50) -> list[Chunk]:
    """Newest first; with `q`, the full-text matches best first."""
    if q.strip():
        ranked = [cid for cid, _ in search_chunks(query=q, scope=scope_for_branch(branch), k=limit)]
        found = Chunk.objects.in_bulk(ranked)
        return hydrate_chunks(found[cid] for cid in ranked if cid in found)
    rows: QuerySet[Chunk] = Chunk.objects.filter(_ancestry_q(branch))
    return hydrate_chunks(rows.order_by("-source_created_at", "-id")[:limit])
