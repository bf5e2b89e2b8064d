"""PostgreSQL: a small append in one statement, one round trip, no BEGIN or COMMIT.

A data-modifying CTE locks the conversation row and advances its counters (UPDATE ...
RETURNING: the same row lock as SELECT ... FOR UPDATE, and after a wait PostgreSQL
re-reads the newest counters), then inserts the messages, their parts and their context
items numbered from the counters it returned. One statement is one transaction in
autocommit mode, so it is all or nothing like the general path, and `seq` stays
gap-free under concurrent writers for the same reason: the counter row is locked until
the statement commits. It serves appends of a few messages with no external ids (those
need a read of the stored ids under the lock first) and no large files (their rows are
recorded inside the general path's transaction); everything else takes the general path.
Why: one message per call paid ten round trips (BEGIN, lock, insert, parts, context,
advance, COMMIT, and the hooks' transaction), each ~0.1-0.2 ms on this machine's loopback
plus Django's and psycopg's work per statement (docs/benchmarks.md, "Reference workload").
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection

from conversations.inputs import MessageInput
from conversations.models import ContextItem, Conversation, ItemType, Message, MessagePart

# Up to this many messages per call (the general path's PostgreSQL batches switch to COPY
# above the same size).
MAX_MESSAGES = 32

_MESSAGE_ARRAYS = (
    ("role", "varchar[]"),
    ("content", "text[]"),
    ("token_count", "integer[]"),
    ("created_at", "timestamptz[]"),
)


def applies(*, messages: Sequence[MessageInput], has_large_files: bool) -> bool:
    return (
        connection.vendor == "postgresql"
        and not has_large_files
        and len(messages) <= MAX_MESSAGES
        and all(m.external_id is None for m in messages)
    )


def _part_column_types(used: Sequence[str]) -> list[str]:
    return [MessagePart._meta.get_field(name).db_type(connection) for name in used]


def _statement(used: Sequence[str], with_parts: bool) -> str:
    new_columns = ", ".join(name for name, _ in _MESSAGE_ARRAYS)
    new_arrays = ", ".join(f"%s::{kind}" for _, kind in _MESSAGE_ARRAYS)
    parts_cte = ""
    if with_parts:
        part_columns = ["part_type", "ordinal", *used]
        part_arrays = ["%s::varchar[]", "%s::integer[]"] + [
            f"%s::{kind}[]" for kind in _part_column_types(used)
        ]
        parts_cte = f""", p AS (
    INSERT INTO {MessagePart._meta.db_table} (message_id, session_id, {", ".join(part_columns)})
    SELECT m.id, conv.session_id, {", ".join(f"part.{c}" for c in part_columns)}
    FROM unnest(%s::integer[], {", ".join(part_arrays)}) AS part(i, {", ".join(part_columns)})
    CROSS JOIN conv JOIN m ON m.seq = conv.seq0 + part.i
)"""
    return f"""WITH conv AS (
    UPDATE {Conversation._meta.db_table}
    SET last_seq = last_seq + %s, last_context_ordinal = last_context_ordinal + %s,
        updated_at = %s
    WHERE id = %s
    RETURNING session_id, last_seq - %s AS seq0, last_context_ordinal - %s AS ordinal0
), new AS (
    SELECT * FROM unnest({new_arrays}) WITH ORDINALITY AS new({new_columns}, i)
), m AS (
    INSERT INTO {Message._meta.db_table}
        (conversation_id, seq, role, content, token_count, created_at, file_ids)
    SELECT %s, conv.seq0 + new.i, new.role, new.content, new.token_count, new.created_at,
        '[]'::jsonb
    FROM conv CROSS JOIN new
    RETURNING id, seq, token_count
), c AS (
    INSERT INTO {ContextItem._meta.db_table}
        (conversation_id, ordinal, item_type, message_id, token_count, created_at)
    SELECT %s, conv.ordinal0 + (m.seq - conv.seq0), '{ItemType.MESSAGE.value}', m.id,
        m.token_count, %s
    FROM conv CROSS JOIN m
){parts_cte}
SELECT m.seq - conv.seq0, m.id, m.seq FROM m CROSS JOIN conv"""


def append(
    *,
    conversation_id: int,
    messages: Sequence[MessageInput],
    prepared: Sequence[tuple[str, int]],
    part_ordinals: Sequence[Sequence[int]],
    now,
) -> list[tuple[int, int]] | None:
    """Write the messages; their (id, seq) in input order, or None when the conversation
    does not exist (nothing was written)."""
    from psycopg.types.json import Jsonb

    count = len(messages)
    used = sorted({name for item in messages for part in item.parts for name in part.columns})
    json_columns = {
        name
        for name in used
        if MessagePart._meta.get_field(name).get_internal_type() == "JSONField"
    }
    part_rows = [
        (index, part, ordinal)
        for index, item in enumerate(messages, start=1)
        for part, ordinal in zip(item.parts, part_ordinals[index - 1], strict=True)
    ]
    params: list = [count, count, now, conversation_id, count, count]
    params += [
        [item.role for item in messages],
        [content for content, _ in prepared],
        [tokens for _, tokens in prepared],
        [item.created_at or now for item in messages],
    ]
    params += [conversation_id, conversation_id, now]
    if part_rows:
        params += [
            [index for index, _, _ in part_rows],
            [part.part_type for _, part, _ in part_rows],
            [ordinal for _, _, ordinal in part_rows],
        ]
        for name in used:
            values = [part.columns.get(name) for _, part, _ in part_rows]
            if name in json_columns:
                values = [None if v is None else Jsonb(v) for v in values]
            params.append(values)
    with connection.cursor() as cursor:
        cursor.execute(_statement(used, with_parts=bool(part_rows)), params)
        rows = cursor.fetchall()
    if not rows:
        return None
    by_index = {index: (pk, seq) for index, pk, seq in rows}
    return [by_index[index] for index in range(1, count + 1)]
