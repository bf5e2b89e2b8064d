"""Transaction-scoped permits: the triggers that refuse a change to canonical rows stand
aside while a permit is held, inside the caller's transaction and no longer. PostgreSQL
reads a `SET LOCAL` setting; SQLite, which has no session settings, a row in a table."""

from __future__ import annotations

import contextlib

from django.db import connection


@contextlib.contextmanager
def transaction_permit(*, setting: str, table: str):
    """Hold the permit the triggers check: `setting` on PostgreSQL, a row of `table` on SQLite."""
    if not connection.in_atomic_block:
        raise RuntimeError(f"the {setting} permit is transaction-scoped: call inside atomic()")
    postgres = connection.vendor == "postgresql"
    with connection.cursor() as cursor:
        if postgres:
            cursor.execute(f"SET LOCAL {setting} = 'on'")
        else:
            cursor.execute(f"INSERT INTO {table} (permit) VALUES (1)")
    try:
        yield
    except BaseException:
        # PostgreSQL: the failed statement aborted the transaction, and its rollback
        # undoes the SET LOCAL. SQLite: a failed statement leaves the transaction open,
        # so the permit row must go now.
        if not postgres:
            with connection.cursor() as cursor:
                cursor.execute(f"DELETE FROM {table}")
        raise
    with connection.cursor() as cursor:
        if postgres:
            cursor.execute(f"SET LOCAL {setting} = 'off'")
        else:
            cursor.execute(f"DELETE FROM {table}")
