"""The database file after retention: on SQLite, give the pages that archiving freed back
to the file system; on both databases, say the size before and after (docs/retention.md,
"Disk space").

SQLite keeps freed pages inside the file unless auto-vacuum is on. New databases are
created with `auto_vacuum=INCREMENTAL` (core/sqlite_setup.py), so a retention run ends with
`PRAGMA incremental_vacuum` (the wholly free pages go) and a WAL checkpoint (the file is cut
to size). A run that archived a tenth of the file or more (or `lcm_retention apply
--vacuum`) runs VACUUM instead, which also gives back the pages archiving emptied only in
part. A database created before auto-vacuum has `auto_vacuum=NONE`, which only a VACUUM can
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


VACUUM_SHARE = 0.10  # a run that archived this share of the file rewrites it whole


def database_space_reclaim(*, freed_bytes: int, vacuum: bool = False) -> SpaceResult:
    """After a retention run: on SQLite, return the free pages to the file system.
    `freed_bytes`: what the run archived or deleted. Incremental auto-vacuum returns only
    pages left wholly empty; archiving empties most pages only in part (a message keeps its
    row), so a run that archived at least VACUUM_SHARE of the file, or `vacuum`, rewrites the
    file whole (VACUUM: it holds the write lock while it runs)."""
    before = database_bytes()
    if connection.vendor != "sqlite" or connection.settings_dict["NAME"] == ":memory:":
        return SpaceResult(before, before, "none")
    whole = vacuum or (freed_bytes > 0 and freed_bytes >= VACUUM_SHARE * before)
    try:
        action = _reclaim(freed=freed_bytes > 0, whole=whole)
    except OperationalError as error:  # busy beyond the timeout: the next run does it
        action = f"none ({error})"
    return SpaceResult(before, database_bytes(), action)


def _reclaim(*, freed: bool, whole: bool) -> str:
    outside = not connection.in_atomic_block  # VACUUM and checkpoints need no transaction
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA auto_vacuum")
        mode = cursor.fetchone()[0]
        if outside and (whole or (mode == NONE and freed)):
            # An older file (auto_vacuum NONE) is converted by its first VACUUM, once.
            cursor.execute(f"PRAGMA auto_vacuum={INCREMENTAL}")
            cursor.execute("VACUUM")
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
