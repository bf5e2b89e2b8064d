from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

from django.db import connection

Mode = Literal["full_text", "substring"]
Table = Literal["message", "summary"]

_TABLES = {"message": "conversations_message", "summary": "conversations_summary"}


class SearchBackend(Protocol):
    vendor: str

    def match_ids(
        self,
        table: Table,
        query: str,
        *,
        mode: Mode,
        conversation_ids: Sequence[int] | None = None,
        limit: int = 50,
    ) -> list: ...


def escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def fts5_phrase_query(text: str) -> str:
    """An FTS5 query that takes every character literally: each word as a quoted string."""
    words = [w for w in text.split() if w]
    return " ".join('"' + w.replace('"', '""') + '"' for w in words)


class PostgresSearch:
    vendor = "postgresql"

    def match_ids(self, table, query, *, mode, conversation_ids=None, limit=50):
        sql_table = _TABLES[table]
        if mode == "full_text":
            where, params = "content_tsv @@ websearch_to_tsquery('english', %s)", [query]
        else:
            where, params = "content ILIKE %s ESCAPE '\\'", [f"%{escape_like(query)}%"]
        if conversation_ids is not None:
            where += " AND conversation_id = ANY(%s)"
            params.append(list(conversation_ids))
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT id FROM {sql_table} WHERE {where} ORDER BY created_at DESC, id DESC LIMIT %s",
                [*params, limit],
            )
            return [row[0] for row in cursor.fetchall()]


class SqliteSearch:
    vendor = "sqlite"

    def match_ids(self, table, query, *, mode, conversation_ids=None, limit=50):
        sql_table = _TABLES[table]
        if mode == "full_text":
            index, match = f"{sql_table}_fts", fts5_phrase_query(query)
        elif len(query) >= 3:
            index, match = f"{sql_table}_trgm", '"' + query.replace('"', '""') + '"'
        else:  # the trigram tokenizer needs three characters; short needles scan
            index, match = None, None
        params: list = []
        if index and match:
            where = f"t.rowid IN (SELECT rowid FROM {index} WHERE {index} MATCH %s)"
            params.append(match)
        elif index:
            return []
        else:
            where = "t.content LIKE %s ESCAPE '\\'"
            params.append(f"%{escape_like(query)}%")
        if conversation_ids is not None:
            marks = ",".join(["%s"] * len(conversation_ids)) or "NULL"
            where += f" AND t.conversation_id IN ({marks})"
            params.extend(conversation_ids)
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT t.id FROM {sql_table} t WHERE {where} ORDER BY t.created_at DESC, t.id DESC LIMIT %s",
                [*params, limit],
            )
            return [row[0] for row in cursor.fetchall()]


def search_backend() -> SearchBackend:
    backends = {"postgresql": PostgresSearch, "sqlite": SqliteSearch}
    return backends[connection.vendor]()
