"""Exact search with numpy over a per-process cache of each namespace's vectors.

The cache holds one float32 matrix per namespace plus the chunk id, conversation id and
last message seq of each row; it is refreshed incrementally (rows with a ChunkVector id
above the highest one cached), so a search costs one small query plus a matrix-vector
product. Vectors are immutable, so cached rows never go stale. Scope filtering is a
vectorised mask. 100,000 x 256 floats is ~100 MB and scans in a few milliseconds.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np
from django.db import connection

from memory.vectors.base import ScopeFilter, VectorHit

_FETCH_BATCH = 20_000


@dataclass
class _Matrix:
    dim: int
    max_id: int = 0
    count: int = 0
    vectors: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    chunk_ids: list[str] = field(default_factory=list)
    conversations: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    seq_end: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    owners: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    def reserve(self, capacity: int) -> None:
        """Room for `capacity` rows (the count is known before a refresh loads them, so a
        full load allocates once, at its exact size)."""
        if capacity <= self.vectors.shape[0]:
            return
        self.vectors = _resize(self.vectors, (capacity, self.dim))
        self.conversations = _resize(self.conversations, (capacity,))
        self.seq_end = _resize(self.seq_end, (capacity,))
        self.owners = _resize(self.owners, (capacity,))

    def grow(self, rows: list[tuple]) -> None:
        need = self.count + len(rows)
        if need > self.vectors.shape[0]:
            self.reserve(max(need, self.vectors.shape[0] + 1024))
        for offset, (vid, chunk_id, conversation_id, seq_end, owner_id, blob) in enumerate(rows):
            i = self.count + offset
            self.vectors[i] = np.frombuffer(bytes(blob), dtype=np.float32)
            self.conversations[i] = conversation_id
            self.seq_end[i] = seq_end
            self.owners[i] = owner_id
            self.chunk_ids.append(chunk_id)
            self.max_id = max(self.max_id, vid)
        self.count = need


def _resize(array: np.ndarray, shape: tuple) -> np.ndarray:
    grown = np.zeros(shape, dtype=array.dtype)
    if array.size:
        grown[: array.shape[0]] = array
    return grown


class NumpyExactIndex:
    name = "numpy"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # keyed by (database alias + name, namespace id): tests switch databases
        self._matrices: dict[tuple[str, int], _Matrix] = {}

    def reset(self) -> None:
        with self._lock:
            self._matrices.clear()

    def _refreshed(self, namespace_id: int, dim: int) -> _Matrix:
        key = (f"{connection.alias}:{connection.settings_dict['NAME']}", namespace_id)
        with self._lock:
            matrix = self._matrices.get(key)
            if matrix is None or matrix.dim != dim:
                matrix = self._matrices[key] = _Matrix(dim=dim)
            with connection.cursor() as cursor:
                # Stale if the last cached row is gone or holds another chunk (a test's
                # rolled-back rows whose ids were reused; chunk ids are never reused). Rows
                # are immutable and never deleted otherwise. One primary-key lookup.
                if matrix.count:
                    cursor.execute(
                        "SELECT chunk_id FROM memory_chunkvector WHERE id = %s", [matrix.max_id]
                    )
                    row = cursor.fetchone()
                    if row is None or row[0] != matrix.chunk_ids[-1]:
                        matrix = self._matrices[key] = _Matrix(dim=dim)
                cursor.execute(
                    "SELECT COUNT(*) FROM memory_chunkvector WHERE namespace_id = %s AND id > %s",
                    [namespace_id, matrix.max_id],
                )
                (pending,) = cursor.fetchone()
                if pending:
                    matrix.reserve(matrix.count + pending + 256)  # a little room for new rows
                while pending:
                    cursor.execute(
                        "SELECT v.id, c.id, c.conversation_id, c.seq_end, cv.owner_id, v.vector "
                        "FROM memory_chunkvector v "
                        "JOIN memory_chunk c ON c.id = v.chunk_id "
                        "JOIN conversations_conversation cv ON cv.id = c.conversation_id "
                        "WHERE v.namespace_id = %s AND v.id > %s ORDER BY v.id LIMIT %s",
                        [namespace_id, matrix.max_id, _FETCH_BATCH],
                    )
                    rows = cursor.fetchall()
                    if not rows:
                        break
                    matrix.grow(rows)
                    pending -= len(rows)
            return matrix

    def search(
        self, *, namespace_id: int, query: np.ndarray, scope: ScopeFilter, k: int, dim: int = 0
    ) -> list[VectorHit]:
        matrix = self._refreshed(namespace_id, dim or int(query.shape[0]))
        n = matrix.count
        if n == 0 or k <= 0:
            return []
        scores = matrix.vectors[:n] @ query.astype(np.float32)
        mask = _scope_mask(matrix, n, scope)
        if mask is not None:
            scores = np.where(mask, scores, -np.inf)
        k = min(k, n)
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [
            VectorHit(matrix.chunk_ids[i], float(scores[i])) for i in top if np.isfinite(scores[i])
        ]


def _scope_mask(matrix: _Matrix, n: int, scope: ScopeFilter) -> np.ndarray | None:
    if scope.conversations is not None:
        mask = np.zeros(n, dtype=bool)
        conversations = matrix.conversations[:n]
        for conversation_id, max_seq in scope.conversations:
            hit = conversations == conversation_id
            if max_seq is not None:
                hit &= matrix.seq_end[:n] <= max_seq
            mask |= hit
        return mask
    if scope.owner_id is not None:
        return matrix.owners[:n] == scope.owner_id
    return None


INDEX = NumpyExactIndex()
