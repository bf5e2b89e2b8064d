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
    unspaced_grams,
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


_GRAM_ROW = {"message": ("conversations_message_cjk", "message_id"),
             "summary": ("conversations_summary_cjk", "summary_rowid")}  # fmt: skip


def _gram_filter(table: Table, words: list[str]) -> tuple[str, list]:
    """Only rows whose gram index (migration 0004) holds every gram of `words`."""
    side, column = _GRAM_ROW[table]
    sql, params = "", []
    for gram in unspaced_grams(words):
        sql += f" AND {_ROWID[table]} IN (SELECT {column} FROM {side} WHERE gram = %s)"
        params.append(gram)
    return sql, params


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
        """One statement in two steps: pick the hits (bm25 only when sorting by relevance:
        it counts every row holding each word), then mark only those: snippet() over every
        match of a common word would cost more than the search. (Two statements cost a
        second round trip, about a third of a selective search.)"""
        match = fts5_literal(q.query)
        if not match:
            return []
        fts = f"{TABLES[table]}_fts"
        scope, scope_params = q.scope.sql()
        times, time_params = q.time_sql()
        bounds, bound_params = _rowid_bounds(table, q, f"{fts}.rowid")
        score = f"-bm25({fts})" if q.sort == "relevance" else "0"
        rows = self._fetch(
            f"""
            WITH picked AS MATERIALIZED (
                SELECT {_columns(table)}, {fts}.rowid AS hit_rowid, {score} AS score
                FROM {fts} JOIN {TABLES[table]} t ON {_ROWID[table]} = {fts}.rowid
                WHERE {fts} MATCH %s{bounds}{scope}{times}
                {q.order_sql(scored=True)}
                LIMIT %s
            )
            SELECT p.*, snippet({fts}, 0, char(2), char(3), '…', 24)
            FROM {fts} CROSS JOIN picked p ON p.hit_rowid = +{fts}.rowid
            WHERE {fts} MATCH %s
                AND {fts}.rowid >= (SELECT MIN(hit_rowid) FROM picked)
                AND {fts}.rowid <= (SELECT MAX(hit_rowid) FROM picked)
            """,
            # FTS5 seeks to the picked rowid range; the join keeps `+rowid` a plain
            # filter (handed to FTS5, each id would re-run the match).
            [match, *bound_params, *scope_params, *time_params, q.limit, match],
        )
        # The picking order, restored (the marking pass reads in rowid order).
        if q.sort == "relevance":
            rows.sort(key=lambda row: (row[7], row[2], row[0]), reverse=True)
        else:
            rows.sort(key=lambda row: (row[2], row[0]), reverse=True)
        relevance, words = q.sort == "relevance", query_words(q.query)
        return [
            make_hit(
                table,
                row[:6],
                snippet=whole_match_marks(from_raw_marks(row[8]), words),
                score=float(row[7]) if relevance else None,
            )
            for row in rows
        ]

    def _substring(self, table: Table, q: GrepQuery) -> list[GrepHit]:
        words = query_words(q.query)
        long_words = [w for w in words if len(w) >= 3]
        where, params = "", []
        if long_words:
            where, params = _trigram_filter(table, q, fts5_literal(" ".join(long_words)))
        # Shorter words have no trigram: the gram index narrows the rows instead.
        gram_where, gram_params = _gram_filter(table, [w for w in words if len(w) < 3])
        where += gram_where
        params += gram_params
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
        else:  # a 1-2 character literal of an unspaced script: the gram index
            short = required_literal(q.query, q.ignore_case, shortest=1)
            if short and len(short) < 3:
                where, params = _gram_filter(table, [short])
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
