"""What a grep asks and what it gets back, independent of the database."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Literal

from django.db import connection
from django.utils.dateparse import parse_datetime

from core.api.errors import InvalidInput, LcmError

Mode = Literal["regex", "full_text"]
Table = Literal["message", "summary"]
Sort = Literal["recency", "relevance"]

TABLES = {"message": "conversations_message", "summary": "conversations_summary"}
MARK_START, MARK_END = "«", "»"


class InvalidPattern(InvalidInput):
    code = "invalid_regex"


class SearchTimeout(LcmError):
    """The pattern needed longer than LCM_GREP_TIMEOUT_MS: the query was stopped."""

    status = 422
    code = "search_timeout"

    @classmethod
    def after(cls, timeout_ms: int) -> SearchTimeout:
        return cls(
            f"the search took longer than {timeout_ms} ms and was stopped; "
            "use a more selective pattern (a literal of 3+ characters helps)",
            extra={"timeout_ms": timeout_ms},
        )


@dataclass(frozen=True)
class Scope:
    """Which conversations a search may read: explicit ids, or every one of an owner,
    or (both None) every conversation (staff)."""

    conversation_ids: tuple[int, ...] | None = None
    owner_id: int | None = None

    def sql(self, alias: str = "t") -> tuple[str, list]:
        if self.conversation_ids is not None:
            marks = ", ".join(["%s"] * len(self.conversation_ids)) or "NULL"
            return f" AND {alias}.conversation_id IN ({marks})", list(self.conversation_ids)
        if self.owner_id is not None:
            return (
                f" AND {alias}.conversation_id IN "
                "(SELECT c.id FROM conversations_conversation c WHERE c.owner_id = %s)",
                [self.owner_id],
            )
        return "", []


@dataclass(frozen=True)
class GrepQuery:
    query: str
    mode: Mode
    scope: Scope
    since: dt.datetime | None = None  # inclusive
    before: dt.datetime | None = None  # exclusive
    limit: int = 50
    sort: Sort = "recency"
    ignore_case: bool = False  # regex only; full text is always case-insensitive
    timeout_ms: int = 2000

    def time_sql(self, alias: str = "t") -> tuple[str, list]:
        sql, params = "", []
        if self.since is not None:
            sql += f" AND {alias}.created_at >= %s"
            params.append(connection.ops.adapt_datetimefield_value(self.since))
        if self.before is not None:
            sql += f" AND {alias}.created_at < %s"
            params.append(connection.ops.adapt_datetimefield_value(self.before))
        return sql, params

    def order_sql(self, *, scored: bool) -> str:
        """Newest first; best score first when sorting by relevance and the statement
        selects a `score`."""
        if self.sort == "relevance" and scored:
            return "ORDER BY score DESC, t.created_at DESC, t.id DESC"
        return "ORDER BY t.created_at DESC, t.id DESC"


@dataclass
class GrepHit:
    table: Table
    id: int | str
    conversation_id: int
    created_at: dt.datetime
    snippet: str
    score: float | None = None
    seq: int | None = None
    depth: int | None = None
    kind: str | None = None

    def sort_key(self, sort: Sort):
        recency = (self.created_at, str(self.id))
        if sort == "relevance" and self.score is not None:
            return (self.score, *recency)
        return (0.0, *recency)


def make_hit(table: Table, row, *, snippet: str, score: float | None) -> GrepHit:
    """A hit from a row (id, conversation_id, created_at, seq, depth, kind)."""
    id_, conversation_id, created_at, seq, depth, kind = row
    aware = as_datetime(created_at)
    if aware is None:
        raise ValueError(f"unreadable datetime {created_at!r}")
    return GrepHit(
        table=table,
        id=id_,
        conversation_id=conversation_id,
        created_at=aware,
        snippet=" ".join((snippet or "").split()),
        score=score,
        seq=seq,
        depth=depth,
        kind=kind,
    )


def as_datetime(value) -> dt.datetime | None:
    """Raw SQL on SQLite returns datetimes as text or naive UTC; make them aware."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    try:
        parsed = dt.datetime.fromisoformat(str(value))  # fast path: Django's stored form
    except ValueError:
        parsed = parse_datetime(str(value))
    if parsed is not None and parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed
