"""The redaction permit: the immutability triggers (security migration 0005) stand aside
for the current transaction only, the same way hard delete's permit lifts DELETE."""

from __future__ import annotations

import contextlib

from django.db import connection


@contextlib.contextmanager
def redact_permit():
    """Allow UPDATEs of canonical rows inside the caller's transaction, and no longer."""
    if not connection.in_atomic_block:
        raise RuntimeError("the redaction permit is transaction-scoped: call inside atomic()")
    postgres = connection.vendor == "postgresql"
    with connection.cursor() as cursor:
        if postgres:
            cursor.execute("SET LOCAL lcm.redact = 'on'")
        else:
            cursor.execute("INSERT INTO security_redact_permit (permit) VALUES (1)")
    try:
        yield
    finally:
        # PostgreSQL: after a failed statement the rollback undoes the SET LOCAL, and a
        # statement would fail; SQLite keeps the transaction open, so the row must go.
        if not postgres:
            with connection.cursor() as cursor:
                cursor.execute("DELETE FROM security_redact_permit")
        elif not connection.needs_rollback:
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL lcm.redact = 'off'")
