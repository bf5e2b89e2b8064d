"""Search index upkeep after many messages lost their content (retention, docs/retention.md).

SQLite: clearing a message's content deletes its FTS5 rows through the update trigger
(migration 0002), but FTS5 records a delete as a tombstone appended to the index, so the
index first grows; `optimize` merges it into one b-tree without the deleted rows. It rewrites
the whole index (seconds per 100,000 remaining rows), so it runs once per retention batch.
PostgreSQL: the tsvector, trigram and gram indexes shrink through (auto)vacuum: nothing here.
"""

from __future__ import annotations

from django.db import connection

MESSAGE_FTS_TABLES = ("conversations_message_fts", "conversations_message_trgm")


def message_index_optimize() -> None:
    if connection.vendor != "sqlite":
        return
    with connection.cursor() as cursor:
        for table in MESSAGE_FTS_TABLES:
            cursor.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")
