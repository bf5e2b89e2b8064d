"""Search storage behind one small interface, chosen by the database vendor.

PostgreSQL: stored tsvector (GIN) for full text, pg_trgm GIN for substring and regex.
SQLite: FTS5 tables (porter/unicode61 words, and trigrams) kept in step by triggers.
Both are created by migration 0002 and maintained by the database on every insert, so a
row is findable as soon as its transaction commits. Retrieval builds grep on top.
"""

from conversations.search.backend import SearchBackend, search_backend

__all__ = ["SearchBackend", "search_backend"]
