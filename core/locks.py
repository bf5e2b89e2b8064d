"""Advisory locks: one kind per purpose, keyed by a conversation id.

PostgreSQL: transaction-scoped advisory locks (`pg_advisory_xact_lock`), released at
commit or rollback, so a crashed worker can never leave one behind. `try_lock` does not
wait and raises a retryable `Conflict` instead.

SQLite: a documented no-op. Every write transaction is BEGIN IMMEDIATE (see settings),
which takes the database-wide write lock at BEGIN, so writers are already serialized.

`held` is the one exception: a session-level lock for a flow that spans several durable
transactions (it is released in `finally`, and by PostgreSQL when the connection ends). It
must be taken outside any transaction.

`lock` and `try_lock` refuse to run outside `transaction.atomic()`: a transaction-scoped lock taken in
autocommit mode would be released before the next statement.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from enum import IntEnum

from django.db import connection

from core.api.errors import Conflict


class LockKind(IntEnum):
    """Never renumber: the number is the first key of the advisory lock."""

    COMPACTION = 1  # planning and applying compaction passes of one conversation
    SESSION_JOIN = 2  # storing one agent session seen from two sides (importers/join.py)


def _key(conversation_id: int) -> int:
    # The two-int4 form of the lock: fold ids past 2**31 (collisions only cost waiting).
    return conversation_id % 2_147_483_647


def _require_transaction() -> None:
    if not connection.in_atomic_block:
        raise RuntimeError("advisory locks are transaction-scoped: call inside atomic()")


def lock(kind: LockKind, conversation_id: int) -> None:
    """Wait for the lock; held until the surrounding transaction ends."""
    _require_transaction()
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [int(kind), _key(conversation_id)])


def try_lock(kind: LockKind, conversation_id: int, *, retry_after: float = 1.0) -> None:
    """Take the lock or raise a retryable `Conflict` (HTTP 409 with Retry-After)."""
    _require_transaction()
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_try_advisory_xact_lock(%s, %s)", [int(kind), _key(conversation_id)]
        )
        (acquired,) = cursor.fetchone()
    if not acquired:
        raise Conflict(
            f"conversation {conversation_id} is being compacted; retry shortly",
            retry_after=retry_after,
            extra={"conversation_id": conversation_id},
        )


@contextmanager
def held(kind: LockKind, conversation_id: int) -> Iterator[None]:
    """A session-level lock around several durable transactions (each service's own),
    released when the block ends. SQLite: a no-op (its writers are serialised per
    transaction only; see the caller's docs for what that leaves)."""
    if connection.vendor != "postgresql":
        yield
        return
    if connection.atomic_blocks and not connection.atomic_blocks[-1]._from_testcase:
        raise RuntimeError("a session-level lock is taken outside transactions")
    key = [int(kind), _key(conversation_id)]
    connection.ensure_connection()
    # The session that takes the lock must release it: work inside the block may hand the
    # connection back to the pool (an after-append hook closing it) and take another one,
    # and a lock left on a pooled session would outlive the block.
    session = connection.connection
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s, %s)", key)
    try:
        yield
    finally:
        if connection.connection is session:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", key)
        elif not session.closed:
            with session.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", key)
