"""Exact search inside SQLite with the sqlite-vec extension's `vec_distance_cosine` over
the stored float32 blobs (the same ChunkVector rows, so chunk ids map back directly).
Scope filtering happens in the same statement. Chosen with LCM_VECTOR_INDEX=sqlite_vec.

The `sqlite-vec` package is an optional extra (`pip install 'lcm-server[sqlite-vec]'`): the
default index (numpy) never loads it, and without it this index raises
VectorIndexUnavailable saying so."""

from __future__ import annotations

import numpy as np
from django.db import connection

from memory.vectors.base import (
    EMBEDDED_ONLY,
    ScopeFilter,
    VectorHit,
    VectorIndexUnavailable,
    scope_sql,
)
from memory.vectors.codec import decode_vector


def load_extension() -> None:
    """Load sqlite-vec into the current connection (once per connection)."""
    raw = connection.connection
    if raw is None:
        connection.ensure_connection()
        raw = connection.connection
    try:
        raw.execute("SELECT vec_version()")
        return
    except Exception:  # noqa: BLE001 - not loaded on this connection yet
        pass
    try:
        import sqlite_vec
    except ImportError as error:
        raise VectorIndexUnavailable(
            "LCM_VECTOR_INDEX=sqlite_vec needs the sqlite-vec package, an optional extra: "
            "pip install 'lcm-server[sqlite-vec]' (or use numpy, the default)"
        ) from error
    if not hasattr(raw, "enable_load_extension"):
        raise VectorIndexUnavailable(
            "LCM_VECTOR_INDEX=sqlite_vec needs a Python whose sqlite3 module can load "
            "extensions; this one was built without it (use numpy, the default)"
        )
    raw.enable_load_extension(True)
    try:
        sqlite_vec.load(raw)
    finally:
        raw.enable_load_extension(False)


class SqliteVecIndex:
    name = "sqlite_vec"

    def search(
        self, *, namespace_id: int, query: np.ndarray, scope: ScopeFilter, k: int, dim: int = 0
    ) -> list[VectorHit]:
        connection.ensure_connection()
        load_extension()
        where, params = scope_sql(scope)
        dim = dim or int(query.shape[0])
        query = query.astype(np.float32)
        plain = f"length(v.vector) = {4 * dim} AND substr(v.vector, 1, 2) <> X'4C56'"
        where = EMBEDDED_ONLY + where
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT c.id, 1.0 - vec_distance_cosine(v.vector, %s) AS similarity "
                "FROM memory_chunkvector v JOIN memory_chunk c ON c.id = v.chunk_id "
                f"WHERE v.namespace_id = %s AND {plain}{where} "
                "ORDER BY similarity DESC LIMIT %s",
                [query.tobytes(), namespace_id, *params, k],
            )
            hits = [VectorHit(chunk_id, float(sim)) for chunk_id, sim in cursor.fetchall()]
            # Compressed vectors of archived content (memory.vectors.codec): sqlite-vec
            # reads float32 only, so they are decoded and scored here.
            cursor.execute(
                "SELECT c.id, v.vector FROM memory_chunkvector v "
                "JOIN memory_chunk c ON c.id = v.chunk_id "
                f"WHERE v.namespace_id = %s AND NOT ({plain}){where}",
                [namespace_id, *params],
            )
            norm = float(np.linalg.norm(query)) or 1.0
            for chunk_id, blob in cursor.fetchall():
                vector = decode_vector(blob, dim)
                cosine = float(vector @ query) / ((float(np.linalg.norm(vector)) or 1.0) * norm)
                hits.append(VectorHit(chunk_id, cosine))
        hits.sort(key=lambda hit: -hit.similarity)
        return hits[:k]
