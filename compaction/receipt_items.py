"""Summaries as receipt items (receipts/items.py): a summary's texts are its content and
its rendering (the XML every request carries it as), and what it covers is the messages
below it, read in one recursive query."""

from __future__ import annotations

from django.db import connection

from compaction import rendering
from conversations.models import Message, Summary, SummaryMessage, SummaryParent
from receipts.items import ItemText

_FIELDS = (
    "id",
    "kind",
    "depth",
    "level",
    "descendant_count",
    "earliest_at",
    "latest_at",
    "content",
    "token_count",
)


def read_summaries(ids: list) -> dict:
    rows = {row["id"]: row for row in Summary.objects.filter(pk__in=ids).values(*_FIELDS)}
    parents: dict[str, list[str]] = {}
    for summary_id, parent_id in (
        SummaryParent.objects.filter(summary_id__in=list(rows))
        .order_by("summary_id", "ordinal")
        .values_list("summary_id", "parent_summary_id")
    ):
        parents.setdefault(summary_id, []).append(parent_id)
    covered = _covered_messages(list(rows))
    found = {}
    for summary_id, row in rows.items():
        xml = rendering.summary_xml(row, parents.get(summary_id, ()))
        messages = covered.get(summary_id, [])
        seqs = [seq for _id, seq in messages]
        found[summary_id] = ItemText(
            texts=[row["content"], xml],
            tokens=row["token_count"],
            redacted="[redacted" in row["content"],
            about={
                "kind": row["kind"],
                "depth": row["depth"],
                "covers": [min(seqs), max(seqs)] if seqs else None,
                "message_ids": [pk for pk, _seq in messages],
            },
        )
    return found


def _covered_messages(summary_ids: list[str]) -> dict[str, list[tuple[int, int]]]:
    """{summary id: [(message id, seq), ...] in seq order}: every message below each."""
    if not summary_ids:
        return {}
    marks = ", ".join(["%s"] * len(summary_ids))
    edge_sum = SummaryParent._meta.db_table
    edge_msg = SummaryMessage._meta.db_table
    message = Message._meta.db_table
    sql = f"""
        WITH RECURSIVE below(top, sid) AS (
            SELECT s.id, s.id FROM {Summary._meta.db_table} s WHERE s.id IN ({marks})
            UNION
            SELECT b.top, sp.parent_summary_id FROM below b
            JOIN {edge_sum} sp ON sp.summary_id = b.sid
        )
        SELECT DISTINCT b.top, m.id, m.seq FROM below b
        JOIN {edge_msg} sm ON sm.summary_id = b.sid
        JOIN {message} m ON m.id = sm.message_id
        ORDER BY b.top, m.seq
    """
    out: dict[str, list[tuple[int, int]]] = {}
    with connection.cursor() as cursor:
        cursor.execute(sql, summary_ids)
        for top, message_id, seq in cursor.fetchall():
            out.setdefault(top, []).append((message_id, seq))
    return out
