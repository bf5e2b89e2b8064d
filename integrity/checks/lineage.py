"""Checks of the summary DAG: sources, depths, cycles, edge order, conversation boundaries."""

from __future__ import annotations

from integrity.checks.scope import Scope, fetch

SUMMARY = "conversations_summary"
MESSAGE = "conversations_message"
EDGE_MSG = "conversations_summarymessage"
EDGE_SUM = "conversations_summaryparent"
CONTEXT = "conversations_contextitem"


def summaries_without_source(scope: Scope) -> list[dict]:
    where, params = scope.where("s.conversation_id")
    return fetch(
        f"""SELECT s.conversation_id, s.id AS summary_id, s.kind
            FROM {SUMMARY} s
            WHERE NOT EXISTS (SELECT 1 FROM {EDGE_MSG} sm WHERE sm.summary_id = s.id)
              AND NOT EXISTS (SELECT 1 FROM {EDGE_SUM} sp WHERE sp.summary_id = s.id){where}
            ORDER BY s.conversation_id, s.id""",
        params,
    )


def depth_mismatches(scope: Scope) -> list[dict]:
    """A source one depth below is the rule; a leaf has only messages, a condensed only summaries."""
    where, params = scope.where("s.conversation_id")
    return fetch(
        f"""SELECT s.conversation_id, s.id AS summary_id, s.depth, p.id AS source_id,
                   p.depth AS source_depth, 'source_depth' AS problem
            FROM {EDGE_SUM} sp
            JOIN {SUMMARY} s ON s.id = sp.summary_id
            JOIN {SUMMARY} p ON p.id = sp.parent_summary_id
            WHERE s.depth <> p.depth + 1{where}
            UNION ALL
            SELECT s.conversation_id, s.id, s.depth, CAST(sm.message_id AS TEXT), NULL,
                   'message_source_on_condensed'
            FROM {EDGE_MSG} sm JOIN {SUMMARY} s ON s.id = sm.summary_id
            WHERE s.kind <> 'leaf'{where}
            ORDER BY 1, 2, 4""",
        params * 2,
    )


def cycles(scope: Scope) -> list[dict]:
    """Summaries that reach themselves through source edges.

    Around a cycle the depth cannot fall at every step, so every cycle holds an edge whose
    source is not deeper-down than its summary: the walk starts only from such edges (none
    in a healthy store, which makes the check free). UNION keeps the walk finite.
    """
    where, params = scope.where("s.conversation_id")
    return fetch(
        f"""WITH RECURSIVE walk(start, node) AS (
                SELECT sp.summary_id, sp.parent_summary_id
                FROM {EDGE_SUM} sp
                JOIN {SUMMARY} s ON s.id = sp.summary_id
                JOIN {SUMMARY} p ON p.id = sp.parent_summary_id
                WHERE p.depth >= s.depth{where}
                UNION
                SELECT w.start, sp.parent_summary_id
                FROM walk w JOIN {EDGE_SUM} sp ON sp.summary_id = w.node
            )
            SELECT DISTINCT s.conversation_id, w.start AS summary_id
            FROM walk w JOIN {SUMMARY} s ON s.id = w.start
            WHERE w.node = w.start
            ORDER BY 1, 2""",
        params,
    )


def ordinal_disorder(scope: Scope) -> list[dict]:
    """Edges listed (by ordinal) out of the chronological order of their sources."""
    where, params = scope.where("sm.conversation_id")
    where_p, params_p = scope.where("sp.conversation_id")
    return fetch(
        f"""SELECT conversation_id, summary_id, ordinal, source, 'message_edges' AS edges FROM (
                SELECT sm.conversation_id, sm.summary_id, sm.ordinal,
                       CAST(m.seq AS TEXT) AS source, m.seq AS position,
                       LAG(m.seq) OVER (PARTITION BY sm.summary_id ORDER BY sm.ordinal) AS previous
                FROM {EDGE_MSG} sm JOIN {MESSAGE} m ON m.id = sm.message_id
                WHERE 1 = 1{where}
            ) t WHERE previous IS NOT NULL AND position <= previous
            UNION ALL
            SELECT conversation_id, summary_id, ordinal, source, 'summary_edges' FROM (
                SELECT sp.conversation_id, sp.summary_id, sp.ordinal, p.id AS source,
                       p.earliest_at AS position,
                       LAG(p.earliest_at) OVER (
                           PARTITION BY sp.summary_id ORDER BY sp.ordinal) AS previous
                FROM {EDGE_SUM} sp JOIN {SUMMARY} p ON p.id = sp.parent_summary_id
                WHERE 1 = 1{where_p}
            ) t WHERE previous IS NOT NULL AND position < previous
            ORDER BY 1, 2, 3""",
        params + params_p,
    )


def cross_conversation(scope: Scope) -> list[dict]:
    """Rows whose own conversation differs from that of a row they point to."""
    pieces, params = [], []
    for label, table, column, target in (
        ("summary_message.summary", EDGE_MSG, "summary_id", SUMMARY),
        ("summary_message.message", EDGE_MSG, "message_id", MESSAGE),
        ("summary_parent.summary", EDGE_SUM, "summary_id", SUMMARY),
        ("summary_parent.source", EDGE_SUM, "parent_summary_id", SUMMARY),
        ("context_item.message", CONTEXT, "message_id", MESSAGE),
        ("context_item.summary", CONTEXT, "summary_id", SUMMARY),
    ):
        # Scoped by the row's own conversation: a row is the problem of the conversation
        # that holds it (a full scan finds every one).
        where, scoped = scope.where("e.conversation_id")
        params += scoped
        pieces.append(
            f"""SELECT e.conversation_id, '{label}' AS reference, CAST(e.id AS TEXT) AS row_id,
                       CAST(e.{column} AS TEXT) AS target_id,
                       t.conversation_id AS target_conversation_id
                FROM {table} e JOIN {target} t ON t.id = e.{column}
                WHERE t.conversation_id <> e.conversation_id{where}"""
        )
    return fetch(" UNION ALL ".join(pieces) + " ORDER BY 1, 2, 3", params)
