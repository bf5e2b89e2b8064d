"""The vector index interface: exact or approximate nearest chunks in one namespace,
restricted to a scope. Every implementation maps rows back to chunk ids through the
ChunkVector table (its integer id is the stable row number, SRD 16.2)."""

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


@dataclass(frozen=True)
class VectorHit:
    chunk_id: str
    similarity: float  # raw cosine


class VectorIndex(Protocol):
    name: str

    def search(
        self, *, namespace_id: int, query: np.ndarray, scope: ScopeFilter, k: int
    ) -> list[VectorHit]: ...
