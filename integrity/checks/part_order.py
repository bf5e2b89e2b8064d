"""`part_reader_disorder`: a code path that reads a message's parts in another order than
their ordinals (integrity.part_readers lists them).

Only messages whose rows are stored out of ordinal order can show it (an unordered read
returns storage order: PostgreSQL's heap order, which an update, an archive pass or a
redaction changes; SQLite's rowid order, which parts given with explicit ordinals set), so
the check looks for those first, among the scope's newest messages, and runs every
registered reader over up to `sample` of them. On a store where no message is stored out
of order no reader can go wrong, and the check costs one read of the parts' order.
"""

from __future__ import annotations

from django.db import connection

from integrity.checks.scope import Scope, fetch
from integrity.part_readers import PART_READERS

WINDOW = 5000  # newest messages of the scope looked at


def stored_out_of_order(scope: Scope, sample: int) -> dict[int, int]:
    """message id -> conversation id, for up to `sample` messages of the scope whose
    parts are stored in another order than their ordinals."""
    where, params = scope.where("m.conversation_id")
    physical = "p.ctid" if connection.vendor == "postgresql" else "p.rowid"
    rows = fetch(
        f"""SELECT p.message_id, p.ordinal, m.conversation_id
            FROM conversations_messagepart p
            JOIN conversations_message m ON m.id = p.message_id
            WHERE p.message_id IN (
                SELECT m.id FROM conversations_message m WHERE 1 = 1{where}
                ORDER BY m.id DESC LIMIT {WINDOW})
            ORDER BY p.message_id, {physical}""",
        params,
    )
    stored: dict[int, list[int]] = {}
    conversation_of: dict[int, int] = {}
    for row in rows:
        stored.setdefault(row["message_id"], []).append(row["ordinal"])
        conversation_of[row["message_id"]] = row["conversation_id"]
    chosen = [m for m, ordinals in stored.items() if ordinals != sorted(ordinals)][:sample]
    return {m: conversation_of[m] for m in chosen}


def readers_out_of_order(scope: Scope, sample: int = 200) -> list[dict]:
    candidates = stored_out_of_order(scope, sample)
    if not candidates:
        return []
    ids = sorted(candidates)
    problems = []
    for name, reader in sorted(PART_READERS.items()):
        for message_id, ordinals in sorted(reader(ids).items()):
            if ordinals != sorted(ordinals):
                problems.append(
                    {
                        "conversation_id": candidates[message_id],
                        "message_id": message_id,
                        "reader": name,
                    }
                )
    return problems
