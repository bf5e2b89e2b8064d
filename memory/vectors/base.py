"""The vector index interface: exact or approximate nearest chunks in one namespace,
restricted to a scope. Every implementation maps rows back to chunk ids through the
ChunkVector table (its integer id is the stable row number, SRD 16.2).

The scope's SQL form (`scope_sql`) lives here too: the SQL indexes (sqlite-vec, pgvector)
and the full-text leg (memory.fulltext) filter with it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np


@dataclass(frozen=True)
class ScopeFilter:
    """Which chunks a search may see: conversations, each optionally only up to a message
    seq (a branch's ancestry up to its fork point), or (None) every conversation of
    `owner_id`, or everything (staff)."""

    conversations: tuple[tuple[int, int | None], ...] | None = None
    owner_id: int | None = None


def scope_sql(scope: ScopeFilter) -> tuple[str, list]:
    """The scope as `" AND ..."` over the chunk table aliased `c`, and its parameters."""
    if scope.conversations is not None:
        if not scope.conversations:
            return " AND 0", []
        parts, params = [], []
        for conversation_id, max_seq in scope.conversations:
            if max_seq is None:
                parts.append("c.conversation_id = %s")
                params.append(conversation_id)
            else:
                parts.append("(c.conversation_id = %s AND c.seq_end <= %s)")
                params.extend([conversation_id, max_seq])
        return " AND (" + " OR ".join(parts) + ")", params
    if scope.owner_id is not None:
        return (
            " AND c.conversation_id IN (SELECT id FROM conversations_conversation "
            "WHERE owner_id = %s)",
            [scope.owner_id],
        )
    return "", []


# The units a vector index scores: a lexical-only unit (the middle of a long tool output,
# memory.tool_output_policy) is stored with a zero vector, which has no cosine (pgvector
# gives NaN); the BM25 leg finds it. Appended to `scope_sql`'s condition by the SQL indexes.
EMBEDDED_ONLY = " AND c.lexical_only IS NOT TRUE"


class VectorIndexUnavailable(Exception):
    """The configured index cannot run here (wrong database, missing extension)."""


@dataclass(frozen=True)
class VectorHit:
    chunk_id: str
    similarity: float  # raw cosine


class VectorIndex(Protocol):
    name: str

    def search(
        self, *, namespace_id: int, query: np.ndarray, scope: ScopeFilter, k: int
    ) -> list[VectorHit]: ...
