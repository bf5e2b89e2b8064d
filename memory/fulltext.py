"""The full-text leg of hybrid retrieval: chunks ranked by BM25 (SQLite FTS5) or
ts_rank_cd (PostgreSQL tsvector), any query word matching (OR), stop words dropped.

It uses the same storage technique as message grep (conversations/search) on the chunk
table (migration 0002): grep's AND semantics suit a user typing words they remember; a
retrieval query is a whole sentence, where requiring every word would find nothing.
"""

from __future__ import annotations

import re

from django.db import connection

from memory.lexical import STOP_WORDS
from memory.vectors.base import ScopeFilter, scope_sql

_WORD = re.compile(r"\w+", re.UNICODE)
MAX_TERMS = 24


def query_terms(query: str) -> list[str]:
    terms = []
    for word in _WORD.findall(query.lower()):
        if len(word) > 1 and word not in STOP_WORDS and word not in terms:
            terms.append(word)
    return terms[:MAX_TERMS]


def search_chunks(*, query: str, scope: ScopeFilter, k: int) -> list[tuple[str, float]]:
    """(chunk id, score) best first; [] when the query has no searchable word."""
    terms = query_terms(query)
    if not terms or k <= 0:
        return []
    where, params = scope_sql(scope)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            tsquery = " || ".join(["plainto_tsquery('english', %s)"] * len(terms))
            cursor.execute(
                f"SELECT c.id, ts_rank_cd(c.text_tsv, q) AS score "
                f"FROM memory_chunk c, ({'SELECT ' + tsquery}) AS t(q) "
                f"WHERE c.text_tsv @@ q{where} ORDER BY score DESC, c.id DESC LIMIT %s",
                [*terms, *params, k],
            )
        else:
            match = " OR ".join('"' + t.replace('"', "") + '"' for t in terms)
            cursor.execute(
                "SELECT c.id, -bm25(memory_chunk_fts) AS score FROM memory_chunk_fts "
                "JOIN memory_chunk c ON c.rowid = memory_chunk_fts.rowid "
                f"WHERE memory_chunk_fts MATCH %s{where} ORDER BY score DESC, c.id DESC LIMIT %s",
                [match, *params, k],
            )
        return [(chunk_id, float(score)) for chunk_id, score in cursor.fetchall()]
