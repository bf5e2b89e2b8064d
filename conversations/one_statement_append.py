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

import functools
import json
from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal

from django.db import connection

from conversations.inputs import MessageInput
from conversations.models import ContextItem, Conversation, ItemType, Message, MessagePart

# Up to this many messages per call (the general path's PostgreSQL batches switch to COPY
# above the same size).
MAX_MESSAGES = 32


def applies(*, messages: Sequence[MessageInput], has_large_files: bool) -> bool:
    return (
        connection.vendor == "postgresql"
        and not has_large_files
        and len(messages) <= MAX_MESSAGES
        and all(m.external_id is None for m in messages)
    )


@functools.cache
def _statement(used: tuple[str, ...]) -> str:
    """The statement for messages whose parts use the part columns `used` (the rows
    arrive as two JSON documents: one parameter each, parsed by the server, instead of an
    array per column that psycopg would render element by element)."""
    fields = [MessagePart._meta.get_field(name) for name in used]
    part_columns = ", ".join(["part_type", "ordinal", *used])
    part_types = ", ".join(
        ["i integer", "part_type varchar", "ordinal integer"]
        + [f"{f.column} {f.db_type(connection)}" for f in fields]
    )
    return f"""WITH conv AS (
    UPDATE {Conversation._meta.db_table}
    SET last_seq = last_seq + %(count)s,
        last_context_ordinal = last_context_ordinal + %(count)s, updated_at = %(now)s
    WHERE id = %(conversation)s
    RETURNING session_id, last_seq - %(count)s AS seq0,
        last_context_ordinal - %(count)s AS ordinal0, clock_timestamp() AS locked_at
), new AS (
    SELECT * FROM jsonb_to_recordset(%(messages)s::jsonb)
        AS new(i integer, role varchar, content text, token_count integer,
               created_at timestamptz)
), m AS (
    INSERT INTO {Message._meta.db_table}
        (conversation_id, seq, role, content, token_count, created_at, file_ids)
    SELECT %(conversation)s, conv.seq0 + new.i, new.role, new.content, new.token_count,
        COALESCE(new.created_at, conv.locked_at), '[]'::jsonb
    FROM conv CROSS JOIN new
    RETURNING id, seq, token_count, created_at
), c AS (
    INSERT INTO {ContextItem._meta.db_table}
        (conversation_id, ordinal, item_type, message_id, token_count, created_at)
    SELECT %(conversation)s, conv.ordinal0 + (m.seq - conv.seq0), '{ItemType.MESSAGE.value}',
        m.id, m.token_count, %(now)s
    FROM conv CROSS JOIN m
), p AS (
    INSERT INTO {MessagePart._meta.db_table} (message_id, session_id, {part_columns})
    SELECT m.id, conv.session_id, {", ".join(f"part.{c}" for c in part_columns.split(", "))}
    FROM jsonb_to_recordset(%(parts)s::jsonb) AS part({part_types})
    CROSS JOIN conv JOIN m ON m.seq = conv.seq0 + part.i
)
SELECT m.seq - conv.seq0, m.id, m.seq, m.created_at FROM m CROSS JOIN conv"""


def _json_value(value):
    """JSON for a part column: decimals as strings (the server reads them as numeric)."""
    return str(value) if isinstance(value, Decimal) else value


def append(
    *,
    conversation_id: int,
    messages: Sequence[MessageInput],
    prepared: Sequence[tuple[str, int]],
    part_ordinals: Sequence[Sequence[int]],
    now,
) -> list[tuple[int, int, datetime]] | None:
    """Write the messages; their (id, seq, created_at) in input order, or None when the
    conversation does not exist (nothing was written). `now` stamps the counter row and
    the context items."""
    used = tuple(
        sorted({name for item in messages for part in item.parts for name in part.columns})
    )
    new_rows = [
        {
            "i": index,
            "role": item.role,
            "content": content,
            "token_count": tokens,
            # Unless given, the time is read by the server once the row lock is held
            # (`conv.locked_at`, one for the whole append): writers take the lock in
            # turn, so those times rise with `seq`, as in the general path.
            "created_at": item.created_at.isoformat() if item.created_at else None,
        }
        for index, (item, (content, tokens)) in enumerate(zip(messages, prepared, strict=True), 1)
    ]
    part_rows = [
        {
            "i": index,
            "part_type": part.part_type,
            "ordinal": ordinal,
            **{name: _json_value(value) for name, value in part.columns.items()},
        }
        for index, item in enumerate(messages, start=1)
        for part, ordinal in zip(item.parts, part_ordinals[index - 1], strict=True)
    ]
    params = {
        "count": len(messages),
        "now": now,
        "conversation": conversation_id,
        "messages": json.dumps(new_rows, ensure_ascii=False),
        "parts": json.dumps(part_rows, ensure_ascii=False),
    }
    with connection.cursor() as cursor:
        cursor.execute(_statement(used), params)
        rows = cursor.fetchall()
    if not rows:
        return None
    by_index = {index: (pk, seq, created_at) for index, pk, seq, created_at in rows}
    return [by_index[index] for index in range(1, len(messages) + 1)]
