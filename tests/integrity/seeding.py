"""Raw-SQL seeding of corruption the database would normally refuse, per backend.

Everything here runs inside the test's transaction and is rolled back with it.
"""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from integrity.checks import Scope
from integrity.report import scan

_SQLITE_GUARDS = [
    f"{table}_{column}_same_conv_{op}"
    for table, column in (
        ("conversations_contextitem", "message_id"),
        ("conversations_contextitem", "summary_id"),
        ("conversations_summarymessage", "message_id"),
        ("conversations_summarymessage", "summary_id"),
        ("conversations_summaryparent", "summary_id"),
        ("conversations_summaryparent", "parent_summary_id"),
    )
    for op in ("ins", "upd")
] + [
    f"{table}_immutable"
    for table in (
        "conversations_message",
        "conversations_messagepart",
        "conversations_summary",
        "conversations_summarymessage",
        "conversations_summaryparent",
    )
]


def sql(statement: str, params=()) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement, list(params))


@pytest.fixture
def rules_bypassed():
    """`bypass_reference_rules`, and a teardown that marks the test transaction for rollback
    so Django does not check the (deliberately broken) deferred foreign keys at the end."""
    yield bypass_reference_rules
    transaction.set_rollback(True)


def bypass_reference_rules() -> None:
    """Let dangling and cross-conversation references, and updates of canonical rows, in
    for the rest of the transaction.

    PostgreSQL: foreign keys and the immutability guard are triggers, which
    `session_replication_role = replica` skips. SQLite: foreign keys are deferred to a
    commit that never comes (the test rolls back), and the same-conversation and
    immutability triggers are dropped (DDL is transactional).
    """
    if connection.vendor == "postgresql":
        sql("SET LOCAL session_replication_role = replica")
    else:
        for trigger in _SQLITE_GUARDS:
            sql(f"DROP TRIGGER IF EXISTS {trigger}")


def problems(conversation_id: int | None = None, **scope) -> dict[str, list[dict]]:
    """Every check with problems, by name."""
    result = scan(Scope(conversation_id, **scope))
    return {o.name: o.problems for o in result.outcomes if o.problems}


def double_estimate(text: str) -> int:
    """A stand-in estimator (by dotted path) that disagrees with every stored count."""
    from core.token_estimate import estimate_tokens

    return 2 * estimate_tokens(text) + 1
