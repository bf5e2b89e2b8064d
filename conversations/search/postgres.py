"""Grep on PostgreSQL.

- full text: the stored `content_tsv` (GIN) with `websearch_to_tsquery` on a literal
  form of the query, ranked by `ts_rank_cd`, marked by `ts_headline`;
- CJK and other unspaced scripts: the 'english' parser keeps a run of such characters as
  one lexeme, so those queries match every word as a substring ((I)LIKE, served by the
  pg_trgm GIN index);
- regex: `~` / `~*`, served by the pg_trgm GIN index; the match is located for the snippet
  with `regexp_instr`.
Every statement runs under `statement_timeout = LCM_GREP_TIMEOUT_MS`, set with
set_config(..., is_local) inside a savepoint and restored afterwards.
"""

from __future__ import annotations

import re

from django.db import DatabaseError, connection, transaction

from conversations.search.query import (
    MARK_END,
    MARK_START,
    TABLES,
    GrepHit,
    GrepQuery,
    InvalidPattern,
    SearchTimeout,
    Table,
    make_hit,
)
from conversations.search.text import (
    escape_like,
    needs_substring_search,
    query_words,
    snippet_at,
    substring_hits,
    unspaced_grams,
    websearch_literal,
    whole_match_marks,
)

_REGEX_SYNTAX = re.compile(r"[\\.^$*+?{}\[\]()|]")

_HEADLINE = (
    f'StartSel="{MARK_START}", StopSel="{MARK_END}", MaxWords=35, MinWords=12, '
    'MaxFragments=2, FragmentDelimiter=" … "'
)


def _columns(table: Table) -> str:
    if table == "message":
        return "t.id, t.conversation_id, t.created_at, t.seq, NULL::integer AS depth, NULL::text AS kind"
    return "t.id, t.conversation_id, t.created_at, NULL::bigint AS seq, t.depth, t.kind"


class PostgresGrep:
    vendor = "postgresql"

    def search(self, table: Table, q: GrepQuery) -> list[GrepHit]:
        if q.mode == "regex":
            return self._run(q, lambda cursor: self._regex(cursor, table, q))
        if needs_substring_search(q.query):
            return self._run(q, lambda cursor: self._substring(cursor, table, q))
        return self._run(q, lambda cursor: self._full_text(cursor, table, q))

    def _run(self, q: GrepQuery, body) -> list[GrepHit]:
        # Inside an outer transaction the local setting would outlive this search, so it
        # is put back; otherwise it ends with the transaction opened here.
        nested = connection.in_atomic_block
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(
                    "SELECT current_setting('statement_timeout'), "
                    "set_config('statement_timeout', %s, true)",
                    [f"{q.timeout_ms}ms"],
                )
                previous = cursor.fetchone()[0]
                hits = body(cursor)
                if nested:
                    cursor.execute("SELECT set_config('statement_timeout', %s, true)", [previous])
                return hits
        except DatabaseError as error:
            state = getattr(error.__cause__, "sqlstate", None)
            if state == "57014":
                raise SearchTimeout.after(q.timeout_ms) from None
            if state == "2201B":
                detail = str(error.__cause__).splitlines()[0]
                raise InvalidPattern(
                    f"invalid regular expression: {detail}", extra={"field": "query"}
                ) from None
            raise

    def _full_text(self, cursor, table: Table, q: GrepQuery) -> list[GrepHit]:
        literal = websearch_literal(q.query)
        scope, scope_params = q.scope.sql()
        times, time_params = q.time_sql()
        sql = f"""
            SELECT h.id, h.conversation_id, h.created_at, h.seq, h.depth, h.kind, h.score,
                   ts_headline('english', translate(h.content, '«»', '‹›'),
                               websearch_to_tsquery('english', %s), %s)
            FROM (
                SELECT {_columns(table)}, t.content,
                       ts_rank_cd(t.content_tsv, query) AS score
                FROM {TABLES[table]} t, websearch_to_tsquery('english', %s) query
                WHERE t.content_tsv @@ query{scope}{times}
                {q.order_sql(scored=True)}
                LIMIT %s
            ) h
        """
        cursor.execute(sql, [literal, _HEADLINE, literal, *scope_params, *time_params, q.limit])
        hits, words = [], query_words(q.query)
        for row in cursor.fetchall():
            score = float(row[6]) if q.sort == "relevance" else None
            snippet = whole_match_marks(row[7], words)
            hits.append(make_hit(table, row[:6], snippet=snippet, score=score))
        return hits

    def _substring(self, cursor, table: Table, q: GrepQuery) -> list[GrepHit]:
        words = query_words(q.query)
        # LIKE for caseless words (CJK): ILIKE folds every row's text first and costs
        # ~4x more on the scan a 1-2 character word needs (no trigram to use).
        likes = "".join(
            " AND t.content LIKE %s" if w.lower() == w.upper() else " AND t.content ILIKE %s"
            for w in words
        )
        params = [f"%{escape_like(w)}%" for w in words]
        scope, scope_params = q.scope.sql()
        times, time_params = q.time_sql()
        # A word shorter than three characters has no trigram: the gram index of its
        # unspaced-script characters picks the candidates instead, and the LIKE decides.
        # The candidates are materialized first: the planner guesses a LIKE on two CJK
        # characters at almost no rows and would then join the scope row by row.
        grams = unspaced_grams([w for w in words if len(w) < 3])
        if grams:
            sql = f"""
                WITH candidates AS MATERIALIZED (
                    SELECT {_columns(table)}, t.content FROM {TABLES[table]} t
                    WHERE t.content_cjk @> %s::text[] AND t.content_cjk IS NOT NULL
                    {scope}{times}
                )
                SELECT t.id, t.conversation_id, t.created_at, t.seq, t.depth, t.kind, t.content
                FROM candidates t WHERE TRUE{likes}
                {q.order_sql(scored=False)}
                LIMIT %s
            """
            cursor.execute(sql, [grams, *scope_params, *time_params, *params, q.limit])
            return substring_hits(table, q, cursor.fetchall(), words)
        sql = f"""
            SELECT {_columns(table)}, t.content FROM {TABLES[table]} t
            WHERE TRUE{likes}{scope}{times}
            {q.order_sql(scored=False)}
            LIMIT %s
        """
        cursor.execute(sql, [*params, *scope_params, *time_params, q.limit])
        return substring_hits(table, q, cursor.fetchall(), words)

    def _regex(self, cursor, table: Table, q: GrepQuery) -> list[GrepHit]:
        operator, flags = ("~*", "i") if q.ignore_case else ("~", "c")
        # A pattern without metacharacters is a plain substring: LIKE finds it first (a
        # 1-2 character CJK word has no trigram, and LIKE scans ~2x faster than `~`).
        plain, plain_params = "", []
        caseless = q.query.lower() == q.query.upper()
        if not _REGEX_SYNTAX.search(q.query) and (caseless or not q.ignore_case):
            plain, plain_params = "t.content LIKE %s AND ", [f"%{escape_like(q.query)}%"]
            grams = unspaced_grams([q.query]) if len(q.query) < 3 else []
            if grams:  # no trigram either: the gram index narrows the rows
                plain += "t.content_cjk @> %s::text[] AND t.content_cjk IS NOT NULL AND "
                plain_params.append(grams)
        scope, scope_params = q.scope.sql()
        times, time_params = q.time_sql()
        window = 80
        sql = f"""
            WITH h AS (
                SELECT {_columns(table)}, t.content FROM {TABLES[table]} t
                WHERE {plain}t.content {operator} %s{scope}{times}
                {q.order_sql(scored=False)}
                LIMIT %s
            ), located AS (
                SELECT h.*, regexp_instr(h.content, %s, 1, 1, 0, %s) AS s,
                       regexp_instr(h.content, %s, 1, 1, 1, %s) AS e
                FROM h
            )
            SELECT id, conversation_id, created_at, seq, depth, kind,
                   GREATEST(1, s - {window}) AS w, s, e,
                   substr(content, GREATEST(1, s - {window}), e - GREATEST(1, s - {window}) + {window}),
                   length(content)
            FROM located ORDER BY created_at DESC, id DESC
        """
        cursor.execute(
            sql,
            [
                *plain_params,
                q.query,
                *scope_params,
                *time_params,
                q.limit,
                q.query,
                flags,
                q.query,
                flags,
            ],
        )
        hits = []
        for row in cursor.fetchall():
            w, s, e, text, length = row[6:11]
            snippet = snippet_at(text, s - w, e - w, context=window)
            if w > 1:
                snippet = "…" + snippet.lstrip("…")
            if w + len(text) - 1 < length and not snippet.endswith("…"):
                snippet += "…"
            hits.append(make_hit(table, row[:6], snippet=snippet, score=None))
        return hits
