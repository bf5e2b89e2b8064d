"""Vector search behind one interface, chosen by LCM_VECTOR_INDEX and the database.

`auto` is the numpy exact scan over a cached matrix on both databases (the tested path,
fastest at this scale); `sqlite_vec` scans inside SQLite; `pgvector` needs the server
extension. An approximate (HNSW) index implements the same `search`.
"""

from __future__ import annotations

from django.conf import settings
from django.db import connection

from memory.vectors.base import ScopeFilter, VectorHit, VectorIndex, VectorIndexUnavailable

__all__ = ["ScopeFilter", "VectorHit", "VectorIndex", "VectorIndexUnavailable", "vector_index"]


def vector_index(kind: str | None = None) -> VectorIndex:
    kind = kind or settings.LCM_VECTOR_INDEX
    if kind in ("auto", "numpy"):
        from memory.vectors.numpy_exact import INDEX

        return INDEX
    if kind == "sqlite_vec":
        if connection.vendor != "sqlite":
            raise VectorIndexUnavailable("LCM_VECTOR_INDEX=sqlite_vec needs SQLite")
        from memory.vectors.sqlite_vec import SqliteVecIndex

        return SqliteVecIndex()
    if kind == "pgvector":
        from memory.vectors import pgvector

        if not pgvector.available():
            raise VectorIndexUnavailable(
                "LCM_VECTOR_INDEX=pgvector but the PostgreSQL server has no vector extension"
            )
        return pgvector.PgVectorIndex()
    raise VectorIndexUnavailable(f"unknown LCM_VECTOR_INDEX {kind!r}")
