"""Search storage behind one small interface, chosen by the database vendor.

PostgreSQL: stored tsvector (GIN) for full text, pg_trgm GIN for substring and regex.
SQLite: FTS5 tables (porter/unicode61 words, and trigrams) kept in step by triggers.
Both are created by migration 0002 and maintained by the database on every insert, so a
row is findable as soon as its transaction commits. `grep` is the entry point.
"""

from conversations.search.backend import SearchBackend, grep, search_backend
from conversations.search.query import (
    GrepHit,
    GrepQuery,
    InvalidPattern,
    Scope,
    SearchTimeout,
)

__all__ = [
    "GrepHit",
    "GrepQuery",
    "InvalidPattern",
    "Scope",
    "SearchBackend",
    "SearchTimeout",
    "grep",
    "search_backend",
]
