"""The database file after retention: on SQLite, give the pages that archiving freed back
to the file system; on both databases, say the size before and after (docs/retention.md,
"Disk space").

SQLite keeps freed pages inside the file unless auto-vacuum is on. New databases are
created with `auto_vacuum=INCREMENTAL` (lcmsite/settings.py), so a retention run ends with
`PRAGMA incremental_vacuum` (the free pages go) and a WAL checkpoint (the file is cut to
size). A database created before that has `auto_vacuum=NONE`, which only a VACUUM can
change: the first retention run that archived anything converts it, once (a VACUUM rewrites
the whole file and holds the write lock meanwhile). PostgreSQL reuses the freed space inside
its files (autovacuum); only `VACUUM FULL` returns it to the system (docs/retention.md).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from django.db import OperationalError, connection

NONE, FULL, INCREMENTAL = 0, 1, 2  # PRAGMA auto_vacuum


@dataclass
class SpaceResult:
    before_bytes: int
    after_bytes: int
    action: str  # incremental_vacuum, vacuum (the one-time conversion), none

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def database_bytes() -> int:
    """The database's size on disk: SQLite's file and its WAL; PostgreSQL's database."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_database_size(current_database())")
            return int(cursor.fetchone()[0])
    name = str(connection.settings_dict["NAME"])
    return sum(os.path.getsize(p) for p in (name, f"{name}-wal") if os.path.exists(p))


def database_space_reclaim(*, freed: bool) -> SpaceResult:
    """After a retention run: on SQLite, return the free pages to the file system (`freed`:
    the run archived or deleted something; a conversion VACUUM waits for such a run)."""
    before = database_bytes()
    if connection.vendor != "sqlite" or connection.settings_dict["NAME"] == ":memory:":
        return SpaceResult(before, before, "none")
    try:
        action = _reclaim(freed=freed)
    except OperationalError as error:  # busy beyond the timeout: the next run does it
        action = f"none ({error})"
    return SpaceResult(before, database_bytes(), action)


def _reclaim(*, freed: bool) -> str:
    outside = not connection.in_atomic_block  # VACUUM and checkpoints need no transaction
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA auto_vacuum")
        mode = cursor.fetchone()[0]
        if mode == NONE and freed and outside:
            cursor.execute(f"PRAGMA auto_vacuum={INCREMENTAL}")
            cursor.execute("VACUUM")  # once: the file is incremental from now on
            action = "vacuum"
        elif mode == INCREMENTAL:
            cursor.execute("PRAGMA incremental_vacuum")
            cursor.fetchall()
            action = "incremental_vacuum"
        else:
            action = "none"
        if outside:  # the WAL's pages back into the file, and the file cut to its size
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            cursor.fetchall()
    return action
