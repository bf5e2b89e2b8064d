"""Checks of canonical messages: reachability (the one that matters most), seqs, counters."""

from __future__ import annotations

from integrity.checks.lineage import CONTEXT, EDGE_MSG, EDGE_SUM, MESSAGE
from integrity.checks.scope import Scope, fetch

CONVERSATION = "conversations_conversation"
# Far above any real DAG (each level condenses several summaries); bounds a walk up a cycle.
_MAX_HEIGHT = 64


def unreachable_messages(scope: Scope) -> list[dict]:
    """History that fell out of view: in no context item and under no summary in the context.

    One recursive query: walk down from the context's summaries to every summary below,
    collect the messages they cover plus the raw message items, anti-join the messages.
    For each lost message it also walks up its lineage to the topmost summary above it
    (`covering_summary_id`, null if none): putting that summary back in the context is the
    repair that keeps compaction's work (every summary above a lost message is lost too).
    """
    where_ci, params_ci = scope.where("ci.conversation_id")
    where_m, params_m = scope.where("m.conversation_id")
    return fetch(
        f"""WITH RECURSIVE reach(sid) AS (
                SELECT ci.summary_id FROM {CONTEXT} ci
                WHERE ci.summary_id IS NOT NULL{where_ci}
                UNION
                SELECT sp.parent_summary_id FROM reach r
                JOIN {EDGE_SUM} sp ON sp.summary_id = r.sid
            ),
            covered(message_id) AS (
                SELECT sm.message_id FROM {EDGE_MSG} sm JOIN reach r ON r.sid = sm.summary_id
                UNION
                SELECT ci.message_id FROM {CONTEXT} ci
                WHERE ci.message_id IS NOT NULL{where_ci}
            ),
            lost AS (
                SELECT m.conversation_id, m.id AS message_id, m.seq
                FROM {MESSAGE} m
                WHERE NOT EXISTS (SELECT 1 FROM covered c WHERE c.message_id = m.id){where_m}
            ),
            up(message_id, sid, height) AS (
                SELECT l.message_id, sm.summary_id, 0
                FROM lost l JOIN {EDGE_MSG} sm ON sm.message_id = l.message_id
                UNION
                SELECT u.message_id, sp.summary_id, u.height + 1
                FROM up u JOIN {EDGE_SUM} sp ON sp.parent_summary_id = u.sid
                WHERE u.height < {_MAX_HEIGHT}
            )
            SELECT l.conversation_id, l.message_id, l.seq,
                   (SELECT u.sid FROM up u WHERE u.message_id = l.message_id
                    ORDER BY u.height DESC, u.sid LIMIT 1) AS covering_summary_id
            FROM lost l
            ORDER BY l.conversation_id, l.seq""",
        params_ci * 2 + params_m,
    )


def seq_gaps(scope: Scope) -> list[dict]:
    where, params = scope.where("conversation_id")
    return fetch(
        f"""SELECT conversation_id, seq, previous_seq,
                   CASE WHEN seq = previous_seq THEN 'duplicate' ELSE 'gap' END AS problem
            FROM (
                SELECT conversation_id, seq,
                       LAG(seq) OVER (PARTITION BY conversation_id ORDER BY seq, id) AS previous_seq
                FROM {MESSAGE} WHERE 1 = 1{where}
            ) t
            WHERE seq <> COALESCE(previous_seq, 0) + 1
            ORDER BY conversation_id, seq""",
        params,
    )


def counter_mismatches(scope: Scope) -> list[dict]:
    """Appends take seq = last_seq + 1 and ordinal = last_context_ordinal + 1: a counter
    behind its rows makes the next append fail; one ahead of max seq leaves a gap."""
    where, params = scope.where("c.id")
    return fetch(
        f"""SELECT * FROM (
                SELECT c.id AS conversation_id, c.last_seq, c.last_context_ordinal,
                       COALESCE((SELECT MAX(seq) FROM {MESSAGE} m
                                 WHERE m.conversation_id = c.id), 0) AS max_seq,
                       COALESCE((SELECT MAX(ordinal) FROM {CONTEXT} ci
                                 WHERE ci.conversation_id = c.id), 0) AS max_ordinal
                FROM {CONVERSATION} c WHERE 1 = 1{where}
            ) t
            WHERE last_seq <> max_seq OR last_context_ordinal < max_ordinal
            ORDER BY conversation_id""",
        params,
    )
