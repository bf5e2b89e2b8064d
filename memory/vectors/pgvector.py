"""pgvector on PostgreSQL, when the server has the `vector` extension. This machine's
server does not: `available()` says so, LCM_VECTOR_INDEX=auto never picks it, and the
test suite covers only the detection. Kept deliberately small.

Design: one side table per namespace, `memory_pgvec_<namespace id>(vector_id bigint
PRIMARY KEY, chunk_id, embedding vector(dim))`, filled from ChunkVector rows above the
highest vector_id it holds (the same incremental rule as the numpy cache; vector_id is
the stable row mapping of SRD 16.2), with an HNSW index (`vector_cosine_ops`) so search
is approximate and sub-linear at scale.
"""

from __future__ import annotations

import numpy as np
from django.db import connection

from memory.vectors.base import EMBEDDED_ONLY, ScopeFilter, VectorHit, scope_sql
from memory.vectors.codec import decode_vector


def available() -> bool:
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
        return cursor.fetchone() is not None


def _literal(vector: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.7g}" for x in vector.astype(np.float32)) + "]"


class PgVectorIndex:
    name = "pgvector"

    def _sync(self, cursor, table: str, namespace_id: int, dim: int) -> None:
        cursor.execute("CREATE EXTENSION IF NOT EXISTS vector")
        cursor.execute(
            f"CREATE TABLE IF NOT EXISTS {table} (vector_id bigint PRIMARY KEY, "
            f"chunk_id varchar(26) NOT NULL, embedding vector({dim}) NOT NULL)"
        )
        cursor.execute(
            f"CREATE INDEX IF NOT EXISTS {table}_hnsw ON {table} "
            "USING hnsw (embedding vector_cosine_ops)"
        )
        cursor.execute(f"SELECT COALESCE(MAX(vector_id), 0) FROM {table}")
        (high,) = cursor.fetchone()
        cursor.execute(
            "SELECT id, chunk_id, vector FROM memory_chunkvector "
            "WHERE namespace_id = %s AND id > %s ORDER BY id",
            [namespace_id, high],
        )
        rows = [
            (vid, chunk_id, _literal(decode_vector(blob, dim)))
            for vid, chunk_id, blob in cursor.fetchall()
        ]
        if rows:
            cursor.executemany(
                f"INSERT INTO {table} (vector_id, chunk_id, embedding) "
                "VALUES (%s, %s, %s::vector) ON CONFLICT DO NOTHING",
                rows,
            )

    def search(
        self, *, namespace_id: int, query: np.ndarray, scope: ScopeFilter, k: int, dim: int = 0
    ) -> list[VectorHit]:
        table = f"memory_pgvec_{int(namespace_id)}"
        where, params = scope_sql(scope)
        with connection.cursor() as cursor:
            self._sync(cursor, table, namespace_id, dim or int(query.shape[0]))
            cursor.execute(
                f"SELECT p.chunk_id, 1 - (p.embedding <=> %s::vector) AS similarity "
                f"FROM {table} p JOIN memory_chunk c ON c.id = p.chunk_id "
                f"WHERE TRUE{EMBEDDED_ONLY}{where} "
                "ORDER BY p.embedding <=> %s::vector LIMIT %s",
                [_literal(query), *params, _literal(query), k],
            )
            return [VectorHit(chunk_id, float(sim)) for chunk_id, sim in cursor.fetchall()]
