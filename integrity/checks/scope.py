"""What a scan covers (one conversation or all) and the SQL helpers the checks share."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection


@dataclass(frozen=True)
class Scope:
    conversation_id: int | None = None  # None: every conversation
    # A stored object younger than this may belong to an ingest that has not committed yet.
    file_grace_seconds: float = 600.0

    def where(self, column: str) -> tuple[str, list]:
        """`AND <column> = %s` with its parameter, or nothing for a full scan."""
        if self.conversation_id is None:
            return "", []
        return f" AND {column} = %s", [self.conversation_id]


def fetch(sql: str, params: list) -> list[dict]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        names = [column[0] for column in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
