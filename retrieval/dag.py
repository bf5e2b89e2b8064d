"""Traversals of the summary DAG, each ONE recursive SQL query (PostgreSQL and SQLite).

Edges (named as in the spec):
- `conversations_summaryparent(summary_id, parent_summary_id)`: the condensed summary
  `summary_id` was made from the source `parent_summary_id` one depth below;
- `conversations_summarymessage(summary_id, message_id)`: a leaf and its source messages.

"Down" (towards the original messages) follows summary_id -> parent_summary_id, then
summary -> message. "Up" (towards the active context) goes the other way. Every
statement here is a single round trip, whatever the size of the subtree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import itemgetter

from django.db import connection

_PAD = 8  # ordinals are zero-padded so that a text path sorts in DAG order


def _pad(column: str) -> str:
    if connection.vendor == "postgresql":
        return f"lpad(CAST({column} AS text), {_PAD}, '0')"
    return f"substr('{'0' * _PAD}' || {column}, -{_PAD}, {_PAD})"


def _as_text(column: str) -> str:
    """A timestamp read as text on PostgreSQL: psycopg's Python-level timestamptz loader
    (as Django configures it) cost more than the rest of a 10,000-row expansion; the
    caller parses each distinct value once (`as_datetime`). SQLite stores text already."""
    return f"CAST({column} AS TEXT)" if connection.vendor == "postgresql" else column


def _then() -> str:
    """The join keyword that keeps the written order: the small side (the traversal so
    far) drives and the edge table is probed by its index. SQLite's planner otherwise
    tends to scan a whole edge table and probe the CTE; `CROSS JOIN` forbids reordering
    there. PostgreSQL plans these well and does not accept ON after CROSS JOIN."""
    return "CROSS JOIN" if connection.vendor == "sqlite" else "JOIN"


def _marks(values: Sequence) -> str:
    return ", ".join(["%s"] * len(values)) or "NULL"


def _tree_cte(max_level: int | None) -> tuple[str, list]:
    """`tree(summary_id, level, path)`: the root (level 0) and every summary below it."""
    bound, params = ("", []) if max_level is None else ("WHERE t.level < %s", [max_level])
    sql = f"""
        tree(summary_id, level, path) AS (
            SELECT s.id, 0, CAST('' AS TEXT) FROM conversations_summary s WHERE s.id = %s
            UNION ALL
            SELECT sp.parent_summary_id, t.level + 1, t.path || {_pad("sp.ordinal")}
            FROM tree t {_then()} conversations_summaryparent sp ON sp.summary_id = t.summary_id
            {bound}
        )"""
    return sql, params


# ---------------------------------------------------------------------------------------
# Covering summaries (up)


def covering_summary_rows(
    message_ids: Sequence[int], conversation_id: int | None = None
) -> dict[int, str | None]:
    """For each message id: the active-context summary whose lineage holds it, or None
    when the message itself is an active context item. A message in neither place (only
    possible between two writes of a compaction) is left out of the answer."""
    ids = list(dict.fromkeys(int(i) for i in message_ids))
    if not ids:
        return {}
    conv_sm, conv_ci, conv_params = "", "", []
    if conversation_id is not None:
        conv_sm, conv_ci = " AND sm.conversation_id = %s", " AND ci.conversation_id = %s"
        conv_params = [conversation_id]
    then = _then()
    sql = f"""
        WITH RECURSIVE up(message_id, summary_id) AS (
            SELECT sm.message_id, sm.summary_id FROM conversations_summarymessage sm
            WHERE sm.message_id IN ({_marks(ids)}){conv_sm}
            UNION
            SELECT up.message_id, sp.summary_id
            FROM up {then} conversations_summaryparent sp ON sp.parent_summary_id = up.summary_id
        )
        SELECT up.message_id, up.summary_id
        FROM up {then} conversations_contextitem ci ON ci.summary_id = up.summary_id
        UNION ALL
        SELECT ci.message_id, NULL FROM conversations_contextitem ci
        WHERE ci.message_id IN ({_marks(ids)}){conv_ci}
    """
    params = [*ids, *conv_params, *ids, *conv_params]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    found: dict[int, str | None] = {}
    for message_id, summary_id in rows:
        # An in-context message (None) wins over any stale lineage answer.
        if summary_id is None or message_id not in found:
            found[message_id] = summary_id
    return found


def ancestor_ids(summary_id: str) -> list[str]:
    """The summary itself and every summary that (transitively) condensed it."""
    sql = f"""
        WITH RECURSIVE up(summary_id) AS (
            SELECT s.id FROM conversations_summary s WHERE s.id = %s
            UNION
            SELECT sp.summary_id FROM up
            {_then()} conversations_summaryparent sp ON sp.parent_summary_id = up.summary_id
        )
        SELECT summary_id FROM up
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, [summary_id])
        return [row[0] for row in cursor.fetchall()]


# ---------------------------------------------------------------------------------------
# Subtree (down)


@dataclass(frozen=True)
class SubtreeNode:
    id: str
    kind: str
    depth: int
    level: int  # edges below the root (the root is level 0)
    token_count: int


def subtree_rows(summary_id: str, max_level: int | None = None) -> list[SubtreeNode]:
    """The root and its descendant summaries in DAG order (pre-order by source ordinal)."""
    tree, params = _tree_cte(max_level)
    sql = f"""
        WITH RECURSIVE {tree}
        SELECT s.id, s.kind, s.depth, t.level, s.token_count
        FROM tree t {_then()} conversations_summary s ON s.id = t.summary_id
        ORDER BY t.path
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, [summary_id, *params])
        return [SubtreeNode(*row) for row in cursor.fetchall()]


@dataclass(frozen=True)
class ManifestRow:
    depth: int | None  # None: the source messages
    count: int
    tokens: int
    min_seq: int | None
    max_seq: int | None


def manifest_rows(summary_id: str) -> list[ManifestRow]:
    """Summaries per depth under (and including) the root, and its source messages.

    Cheap whatever the subtree's size: the message count is read from the edge index, the
    tokens from the root's stored `descendant_token_count`, and the seq range from the
    first source of the first leaf and the last source of the last leaf in DAG order
    (compaction summarizes and condenses adjacent runs, in order)."""
    tree, params = _tree_cte(None)
    sql = f"""
        WITH RECURSIVE {tree},
        nodes AS (
            SELECT DISTINCT s.id, s.kind, s.depth, s.token_count, MIN(t.path) AS path
            FROM tree t {_then()} conversations_summary s ON s.id = t.summary_id
            GROUP BY s.id, s.kind, s.depth, s.token_count
        ),
        leaves AS (SELECT id, path FROM nodes WHERE kind = 'leaf')
        SELECT depth, COUNT(*), COALESCE(SUM(token_count), 0), NULL, NULL
        FROM nodes GROUP BY depth
        UNION ALL
        SELECT NULL,
            (SELECT COUNT(*) FROM leaves l
             {_then()} conversations_summarymessage sm ON sm.summary_id = l.id),
            (SELECT descendant_token_count FROM conversations_summary WHERE id = %s),
            (SELECT m.seq FROM conversations_summarymessage sm
             JOIN conversations_message m ON m.id = sm.message_id
             WHERE sm.summary_id = (SELECT id FROM leaves ORDER BY path LIMIT 1)
             ORDER BY sm.ordinal LIMIT 1),
            (SELECT m.seq FROM conversations_summarymessage sm
             JOIN conversations_message m ON m.id = sm.message_id
             WHERE sm.summary_id = (SELECT id FROM leaves ORDER BY path DESC LIMIT 1)
             ORDER BY sm.ordinal DESC LIMIT 1)
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, [summary_id, *params, summary_id])
        rows = [ManifestRow(*row) for row in cursor.fetchall()]
    return sorted(rows, key=lambda r: -1 if r.depth is None else r.depth, reverse=True)


def neighbour_rows(summary_id: str) -> list[tuple[str, str, str, int, int]]:
    """(relation, id, kind, depth, token_count) for the summary's sources ("parent",
    in source order) and the summaries made from it ("child")."""
    sql = """
        SELECT 'parent', s.id, s.kind, s.depth, s.token_count, sp.ordinal
        FROM conversations_summaryparent sp
        JOIN conversations_summary s ON s.id = sp.parent_summary_id
        WHERE sp.summary_id = %s
        UNION ALL
        SELECT 'child', s.id, s.kind, s.depth, s.token_count, 0
        FROM conversations_summaryparent sp
        JOIN conversations_summary s ON s.id = sp.summary_id
        WHERE sp.parent_summary_id = %s
        ORDER BY 1 DESC, 6
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, [summary_id, summary_id])
        return [row[:5] for row in cursor.fetchall()]


# ---------------------------------------------------------------------------------------
# Expansion (down, with a token cap applied by the database)


# An expansion row, a plain tuple in this column order: the sort keys (group, DAG path,
# ordinal), then what callers read. item is "summary", "message", or "leaf_messages" (all
# messages of a leaf, omitted); content is None once the running token total passed the
# cap. Tuples, not named tuples: an uncapped expansion returns one per source message, and
# building a named tuple for each cost a tenth of an 8,000-message expansion.
EXPAND_COLUMNS = (
    "grp", "path", "ord", "item", "summary_id", "message_id", "kind", "depth", "role",
    "seq", "token_count", "content", "level", "created_at",
)  # fmt: skip
_TOKENS, _CONTENT = EXPAND_COLUMNS.index("token_count"), EXPAND_COLUMNS.index("content")


def expand_rows(
    summary_id: str, *, max_level: int, include_messages: bool, token_cap: int
) -> list[tuple]:
    """Descendant summaries (pre-order) then, if asked, the source messages of every leaf
    reached (leaf by leaf in DAG order, each in source order), with content only while
    the running token total fits `token_cap`.

    Leaves whose stored `source_token_count` says they start past the cap are not read at
    all: each comes back as one 'leaf_messages' row (the leaf id, its message count in
    `seq`), so the cost follows what is returned, not the subtree's size. The exact running
    total over what was read decides what is cut (so a wrong stored count cannot break the
    cap); it is added up here rather than by a window over every row in SQL, which cost
    more than the rest of the statement. Summaries (few) are cut by a window in SQL, so
    their text past the cap is not read; the message text read and then cut here is at
    most the rest of one leaf."""
    sql, params = _expand_sql(summary_id, max_level, include_messages, token_cap)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    # No ORDER BY in the SQL: the database's sort of 10,000 rows carrying their text cost
    # a third of the statement on PostgreSQL and a fifth of the expansion on SQLite; the
    # rows are sorted here on their three short keys instead (paths are zero-padded
    # digits, so Python orders them as both databases would).
    rows.sort(key=itemgetter(0, 1, 2))
    return _cut_at_cap(rows, token_cap)


def _expand_sql(
    summary_id: str, max_level: int, include_messages: bool, token_cap: int
) -> tuple[str, list]:
    """The one statement of `expand_rows`: the summaries below the root (cut by a window
    in SQL), then the messages of the leaves (`_leaf_messages_sql`), unsorted."""
    tree, params = _tree_cte(max_level)
    messages, message_params = _leaf_messages_sql(token_cap) if include_messages else ("", [])
    sql = f"""
        WITH RECURSIVE {tree},
        nodes AS (
            SELECT t.path, t.level, s.id, s.kind, s.depth, s.token_count, s.content,
                   {_as_text("s.created_at")} AS created_at, s.source_token_count
            FROM tree t {_then()} conversations_summary s ON s.id = t.summary_id
        ),
        head AS (SELECT COALESCE(SUM(token_count), 0) AS tokens FROM nodes WHERE level > 0),
        leaves AS (
            SELECT path, level, id, SUM(source_token_count) OVER (
                ORDER BY path ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
            ) - source_token_count AS before
            FROM nodes WHERE kind = 'leaf'
        ),
        items({", ".join(EXPAND_COLUMNS)}) AS (
            SELECT 0, path, 0, 'summary', id, CAST(NULL AS BIGINT), kind, depth,
                   CAST(NULL AS TEXT), CAST(NULL AS BIGINT), token_count,
                   CASE WHEN SUM(token_count) OVER (
                       ORDER BY path ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
                   ) <= %s THEN content END,
                   level, created_at
            FROM nodes WHERE level > 0
            {messages}
        )
        SELECT {", ".join(EXPAND_COLUMNS)} FROM items
    """
    return sql, [summary_id, *params, token_cap, *message_params]


def _leaf_messages_sql(token_cap: int) -> tuple[str, list]:
    """The message rows of `expand_rows`: every message of a leaf that starts within the
    cap, and one 'leaf_messages' row for each leaf that starts past it."""
    then = _then()
    sql = f"""
        UNION ALL
        SELECT 1, l.path, sm.ordinal, 'message', CAST(NULL AS TEXT), m.id,
               CAST(NULL AS TEXT), CAST(NULL AS INTEGER), m.role, m.seq, m.token_count,
               m.content, l.level + 1, {_as_text("m.created_at")}
        FROM leaves l CROSS JOIN head h
        {then} conversations_summarymessage sm ON sm.summary_id = l.id
        {then} conversations_message m ON m.id = sm.message_id
        WHERE l.before + h.tokens < %s
        UNION ALL
        SELECT 1, l.path, 0, 'leaf_messages', l.id, CAST(NULL AS BIGINT),
               CAST(NULL AS TEXT), CAST(NULL AS INTEGER), CAST(NULL AS TEXT),
               (SELECT COUNT(*) FROM conversations_summarymessage sm
                WHERE sm.summary_id = l.id),
               %s, CAST(NULL AS TEXT), l.level + 1, NULL
        FROM leaves l CROSS JOIN head h
        WHERE l.before + h.tokens >= %s
    """
    return sql, [token_cap, token_cap + 1, token_cap]


def _cut_at_cap(rows: list[tuple], token_cap: int) -> list[tuple]:
    """`rows` (sorted) with the text dropped from the row where the running token total
    first passes `token_cap` onwards."""
    running = 0
    for index, row in enumerate(rows):
        running += row[_TOKENS]
        if running > token_cap:
            rows[index:] = [(*r[:_CONTENT], None, *r[_CONTENT + 1 :]) for r in rows[index:]]
            break
    return rows
