"""Checks of the active context: dangling references, ordinals, and order."""

from __future__ import annotations

from integrity.checks.lineage import CONTEXT, EDGE_MSG, EDGE_SUM, MESSAGE, SUMMARY
from integrity.checks.scope import Scope, fetch


def missing_targets(scope: Scope) -> list[dict]:
    where, params = scope.where("ci.conversation_id")
    return fetch(
        f"""SELECT ci.conversation_id, ci.id AS context_item_id, ci.ordinal, ci.item_type,
                   ci.message_id, ci.summary_id
            FROM {CONTEXT} ci
            LEFT JOIN {MESSAGE} m ON m.id = ci.message_id
            LEFT JOIN {SUMMARY} s ON s.id = ci.summary_id
            WHERE ((ci.message_id IS NOT NULL AND m.id IS NULL)
                OR (ci.summary_id IS NOT NULL AND s.id IS NULL)
                OR (ci.message_id IS NULL AND ci.summary_id IS NULL)){where}
            ORDER BY ci.conversation_id, ci.ordinal""",
        params,
    )


def duplicate_ordinals(scope: Scope) -> list[dict]:
    where, params = scope.where("conversation_id")
    return fetch(
        f"""SELECT conversation_id, ordinal, COUNT(*) AS items
            FROM {CONTEXT} WHERE 1 = 1{where}
            GROUP BY conversation_id, ordinal HAVING COUNT(*) > 1
            ORDER BY conversation_id, ordinal""",
        params,
    )


def first_seq_sql(scope: Scope) -> tuple[str, list]:
    """CTEs `reach(root, sid)` and `item_first(...)`: each context item with the first
    message seq it covers (its own seq, or the seq below a summary reached by following
    each level's first source). One query.

    Following only first sources (by edge ordinal) reads a few rows per context summary
    instead of its whole subtree; with edges in order, which `lineage_ordinal_disorder`
    checks, it is the smallest seq below."""
    where, params = scope.where("ci.conversation_id")
    sql = f"""
        reach(root, sid) AS (
            SELECT ci.summary_id, ci.summary_id FROM {CONTEXT} ci
            WHERE ci.summary_id IS NOT NULL{where}
            UNION
            SELECT r.root, sp.parent_summary_id
            FROM reach r JOIN {EDGE_SUM} sp ON sp.summary_id = r.sid
            WHERE sp.ordinal = (SELECT o.ordinal FROM {EDGE_SUM} o
                                WHERE o.summary_id = r.sid ORDER BY o.ordinal LIMIT 1)
        ),
        summary_first(root, seq) AS (
            SELECT r.root, MIN(m.seq) FROM reach r
            JOIN {EDGE_MSG} sm ON sm.summary_id = r.sid
            JOIN {MESSAGE} m ON m.id = sm.message_id
            WHERE sm.ordinal = (SELECT o.ordinal FROM {EDGE_MSG} o
                                WHERE o.summary_id = r.sid ORDER BY o.ordinal LIMIT 1)
            GROUP BY r.root
        ),
        item_first AS (
            SELECT ci.conversation_id, ci.id AS context_item_id, ci.ordinal, ci.item_type,
                   ci.message_id, ci.summary_id, COALESCE(m.seq, f.seq) AS first_seq
            FROM {CONTEXT} ci
            LEFT JOIN {MESSAGE} m ON m.id = ci.message_id
            LEFT JOIN summary_first f ON f.root = ci.summary_id
            WHERE 1 = 1{where}
        )"""
    return sql, params * 2


def order_mismatches(scope: Scope) -> list[dict]:
    """The first covered seq must rise strictly with the ordinal."""
    ctes, params = first_seq_sql(scope)
    return fetch(
        f"""WITH RECURSIVE {ctes},
            ordered AS (
                SELECT item_first.*, LAG(first_seq) OVER (
                    PARTITION BY conversation_id ORDER BY ordinal, context_item_id) AS previous_seq
                FROM item_first WHERE first_seq IS NOT NULL
            )
            SELECT conversation_id, context_item_id, ordinal, item_type, first_seq, previous_seq
            FROM ordered WHERE previous_seq IS NOT NULL AND first_seq <= previous_seq
            ORDER BY conversation_id, ordinal""",
        params,
    )
