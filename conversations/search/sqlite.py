"""Grep on SQLite.

- full text: the FTS5 word index (`..._fts`, porter/unicode61) with every query word
  quoted, ranked by bm25, marked by snippet();
- CJK and other unspaced scripts: unicode61 keeps such a run as one token, so each word
  is matched as a substring: the trigram index (`..._trgm`) for words of 3+ characters,
  LIKE for shorter ones;
- regex: the `regex` package, whose matcher takes a timeout, over candidate rows in
  recency order (prefiltered by the trigram index when the pattern has a required literal
  of 3+ characters). Every row is considered until `limit` hits are found: no window of
  "recent rows only", so no match is ever missed.
A progress handler interrupts any statement that runs past LCM_GREP_TIMEOUT_MS.
"""

from __future__ import annotations

import time
from contextlib import contextmanager

from django.db import OperationalError, connection

from conversations.search.query import (
    TABLES,
    GrepHit,
    GrepQuery,
    SearchTimeout,
    Table,
    make_hit,
)
from conversations.search.text import (
    compile_regex,
    escape_like,
    from_raw_marks,
    fts5_literal,
    fts5_phrase,
    needs_substring_search,
    query_words,
    required_literal,
    snippet_at,
    substring_hits,
    whole_match_marks,
)

_ROWID = {"message": "t.id", "summary": "t.rowid"}
_CHUNK = 500


def _columns(table: Table) -> str:
    if table == "message":
        return "t.id, t.conversation_id, t.created_at, t.seq, NULL, NULL"
    return "t.id, t.conversation_id, t.created_at, NULL, t.depth, t.kind"


def _rowid_bounds(table: Table, q: GrepQuery, column: str) -> tuple[str, list]:
    """For a search of given conversations: bound the index scan to the rowid range of
    their rows. FTS5 seeks its doclists to a rowid range, so a small conversation is not
    paid for with every match in the database; the conversation filter still decides."""
    ids = q.scope.conversation_ids
    if not ids:
        return "", []
    marks = ", ".join(["%s"] * len(ids))
    rows = f"FROM {TABLES[table]} b WHERE b.conversation_id IN ({marks})"
    return (
        f" AND {column} >= (SELECT MIN(b.rowid) {rows}) AND {column} <= (SELECT MAX(b.rowid) {rows})",
        [*ids, *ids],
    )


def _trigram_filter(table: Table, q: GrepQuery, match: str) -> tuple[str, list]:
    """Only rows whose text the trigram index matches with `match` (an FTS5 string)."""
    trgm = f"{TABLES[table]}_trgm"
    bounds, bound_params = _rowid_bounds(table, q, "rowid")
    return (
        f" AND {_ROWID[table]} IN (SELECT rowid FROM {trgm} WHERE {trgm} MATCH %s{bounds})",
        [match, *bound_params],
    )


class SqliteGrep:
    vendor = "sqlite"

    def search(self, table: Table, q: GrepQuery) -> list[GrepHit]:
        deadline = time.monotonic() + q.timeout_ms / 1000
        with self._deadline(deadline, q):
            if q.mode == "regex":
                return self._regex(table, q, deadline)
            if needs_substring_search(q.query):
                return self._substring(table, q)
            return self._full_text(table, q)

    @contextmanager
    def _deadline(self, deadline: float, q: GrepQuery):
        connection.ensure_connection()
        raw = connection.connection
        raw.set_progress_handler(lambda: int(time.monotonic() > deadline), 20_000)
        try:
            yield
        except OperationalError as error:
            if "interrupted" in str(error):
                raise SearchTimeout.after(q.timeout_ms) from None
            raise
        finally:
            raw.set_progress_handler(None, 0)

    def _fetch(self, sql: str, params: list) -> list[tuple]:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchall()

    def _full_text(self, table: Table, q: GrepQuery) -> list[GrepHit]:
        """Two statements: pick the hits (bm25 only when sorting by relevance: it counts
        every row holding each word), then mark only those: snippet() over every match of
        a common word would cost more than the search."""
        match = fts5_literal(q.query)
        if not match:
            return []
        fts = f"{TABLES[table]}_fts"
        scope, scope_params = q.scope.sql()
        times, time_params = q.time_sql()
        bounds, bound_params = _rowid_bounds(table, q, f"{fts}.rowid")
        score = f"-bm25({fts})" if q.sort == "relevance" else "0"
        picked = self._fetch(
            f"""
            SELECT {_columns(table)}, {fts}.rowid, {score} AS score
            FROM {fts} JOIN {TABLES[table]} t ON {_ROWID[table]} = {fts}.rowid
            WHERE {fts} MATCH %s{bounds}{scope}{times}
            {q.order_sql(scored=True)}
            LIMIT %s
            """,
            [match, *bound_params, *scope_params, *time_params, q.limit],
        )
        if not picked:
            return []
        rowids = [row[6] for row in picked]
        marks = ", ".join(["%s"] * len(rowids))
        snippets = dict(
            self._fetch(
                f"""
                SELECT rowid, snippet({fts}, 0, char(2), char(3), '…', 24)
                FROM {fts} WHERE {fts} MATCH %s AND rowid >= %s AND rowid <= %s
                    AND +rowid IN ({marks})
                """,
                # FTS5 seeks to a rowid range; an IN list handed to it would re-run the
                # match once per id, so `+` keeps the list a plain filter.
                [match, min(rowids), max(rowids), *rowids],
            )
        )
        relevance, words = q.sort == "relevance", query_words(q.query)
        return [
            make_hit(
                table,
                row[:6],
                snippet=whole_match_marks(from_raw_marks(snippets[row[6]]), words),
                score=float(row[7]) if relevance else None,
            )
            for row in picked
        ]

    def _substring(self, table: Table, q: GrepQuery) -> list[GrepHit]:
        words = query_words(q.query)
        long_words = [w for w in words if len(w) >= 3]
        where, params = "", []
        if long_words:
            where, params = _trigram_filter(table, q, fts5_literal(" ".join(long_words)))
        for word in words:
            where += " AND t.content LIKE %s ESCAPE '\\'"
            params.append(f"%{escape_like(word)}%")
        scope, scope_params = q.scope.sql()
        times, time_params = q.time_sql()
        sql = f"""
            SELECT {_columns(table)}, t.content FROM {TABLES[table]} t
            WHERE 1{where}{scope}{times}
            {q.order_sql(scored=False)}
            LIMIT %s
        """
        rows = self._fetch(sql, [*params, *scope_params, *time_params, q.limit])
        return substring_hits(table, q, rows, words)

    def _regex(self, table: Table, q: GrepQuery, deadline: float) -> list[GrepHit]:
        pattern = compile_regex(q.query, q.ignore_case)
        literal = required_literal(q.query, q.ignore_case)
        where, params = "", []
        if literal:
            where, params = _trigram_filter(table, q, fts5_phrase(literal))
        scope, scope_params = q.scope.sql()
        times, time_params = q.time_sql()
        # Candidates in recency order without their text (a cheap sort), then the text in
        # chunks: a regex that matches only old rows still reaches them.
        candidates = self._fetch(
            f"""SELECT t.id FROM {TABLES[table]} t WHERE 1{where}{scope}{times}
                ORDER BY t.created_at DESC, t.id DESC""",
            [*params, *scope_params, *time_params],
        )
        hits: list[GrepHit] = []
        ids = [row[0] for row in candidates]
        for offset in range(0, len(ids), _CHUNK):
            chunk = ids[offset : offset + _CHUNK]
            marks = ", ".join(["%s"] * len(chunk))
            rows = self._fetch(
                f"SELECT {_columns(table)}, t.content FROM {TABLES[table]} t "
                f"WHERE t.id IN ({marks}) ORDER BY t.created_at DESC, t.id DESC",
                chunk,
            )
            for row in rows:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise SearchTimeout.after(q.timeout_ms)
                try:
                    found = pattern.search(row[6], timeout=remaining)
                except TimeoutError:
                    raise SearchTimeout.after(q.timeout_ms) from None
                if found:
                    snippet = snippet_at(row[6], found.start(), found.end())
                    hits.append(make_hit(table, row[:6], snippet=snippet, score=None))
                    if len(hits) >= q.limit:
                        return hits
        return hits
