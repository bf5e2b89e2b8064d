"""A new SQLite file is made with `auto_vacuum=INCREMENTAL` (retention/storage.py gives
the freed pages back with it; docs/retention.md, "Disk space").

The pragma only takes effect before the first table exists, but set on every connection
(it was the first statement of `init_command`) it cost more than the rest of opening one,
and every request opens one (docs/benchmarks.md, "Server time before the first byte"):
so it is set only while the file holds no table yet."""

from __future__ import annotations


def auto_vacuum_on_new_file(sender, connection, **kwargs) -> None:
    """`connection_created` receiver."""
    if connection.vendor != "sqlite":
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM sqlite_master LIMIT 1")
        if cursor.fetchone() is None:
            # The file's header is written already (journal_mode=WAL): an empty VACUUM
            # makes the change, at once.
            cursor.execute("PRAGMA auto_vacuum=INCREMENTAL")
            cursor.execute("VACUUM")
