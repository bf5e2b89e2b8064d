"""The one search interface, chosen by `connection.vendor`, and grep on top of it.

`grep(q, tables)` asks the backend for at most `q.limit` hits per table, merges them in
the requested order and cuts to `q.limit`. Backends: `postgres.PostgresGrep` (tsvector +
pg_trgm) and `sqlite.SqliteGrep` (FTS5 + timeout-bounded regex).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from django.db import connection

from conversations.search.query import GrepHit, GrepQuery, Table


class SearchBackend(Protocol):
    vendor: str

    def search(self, table: Table, q: GrepQuery) -> list[GrepHit]: ...


def search_backend() -> SearchBackend:
    from conversations.search.postgres import PostgresGrep
    from conversations.search.sqlite import SqliteGrep

    backends = {"postgresql": PostgresGrep, "sqlite": SqliteGrep}
    return backends[connection.vendor]()


def grep(q: GrepQuery, tables: Sequence[Table]) -> list[GrepHit]:
    backend = search_backend()
    hits: list[GrepHit] = []
    for table in tables:
        hits.extend(backend.search(table, q))
    if len(tables) > 1:
        hits.sort(key=lambda hit: hit.sort_key(q.sort), reverse=True)
    return hits[: q.limit]
