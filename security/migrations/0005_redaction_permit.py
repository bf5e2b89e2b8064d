"""Redaction (docs/security.md) is the one path that may rewrite canonical content.

Every trigger that refuses an UPDATE of a canonical or derived-immutable row (messages,
parts, summaries, lineage, memory chunks and vectors, turns, steps, states: the
`*_immutable` triggers of conversations 0003/0008, memory 0002/0005/0006, turns 0002) now
stands aside while the redaction permit is held, and only then:

- PostgreSQL: each trigger gets `WHEN (coalesce(current_setting('lcm.redact', true), '')
  <> 'on')`; the redaction service sets `lcm.redact` with `SET LOCAL`, which ends with its
  transaction (security.redaction.permit).
- SQLite: each trigger's WHEN gets `NOT EXISTS (SELECT 1 FROM security_redact_permit)`;
  the service inserts that row and removes it inside its own write transaction, so no
  other connection ever sees it.

The triggers are rewritten from their stored definitions, so whatever each one checked
before it still checks without the permit. DELETE stays refused (hard delete's permit).
"""

import re

from django.db import migrations

PG_CONDITION = "coalesce(current_setting('lcm.redact', true), '') <> 'on'"
SQLITE_CONDITION = "NOT EXISTS (SELECT 1 FROM security_redact_permit)"
_PG_DEF = re.compile(
    r"^(?P<head>.*?FOR EACH ROW)(?: WHEN \((?P<when>.*)\))? (?P<tail>EXECUTE .*)$", re.S
)


def _pg_triggers(cursor) -> list[tuple[str, str, str]]:
    cursor.execute(
        """SELECT tgname, tgrelid::regclass::text, pg_get_triggerdef(oid) FROM pg_trigger
           WHERE NOT tgisinternal AND (tgtype & 16) <> 0 AND (tgtype & 2) <> 0
             AND tgname LIKE '%%\\_immutable'"""
    )
    return cursor.fetchall()


def _pg_forward(cursor) -> None:
    for name, table, definition in _pg_triggers(cursor):
        match = _PG_DEF.match(definition)
        if match is None or "lcm.redact" in definition:
            continue
        when = PG_CONDITION + (f" AND ({match['when']})" if match["when"] else "")
        cursor.execute(f'DROP TRIGGER "{name}" ON {table}')
        cursor.execute(f"{match['head']} WHEN ({when}) {match['tail']}")


# How PostgreSQL prints the condition back (pg_get_triggerdef normalises it).
_PG_PRINTED = re.compile(
    r"\(COALESCE\(current_setting\('lcm\.redact'::text, true\), ''::text\) <> 'on'::text\)"
    r"(?: AND )?"
)


def _pg_backward(cursor) -> None:
    for name, table, definition in _pg_triggers(cursor):
        match = _PG_DEF.match(definition)
        if match is None or not match["when"] or "lcm.redact" not in match["when"]:
            continue
        rest = _PG_PRINTED.sub("", match["when"], count=1).strip()
        cursor.execute(f'DROP TRIGGER "{name}" ON {table}')
        cursor.execute(f"{match['head']}{f' WHEN ({rest})' if rest else ''} {match['tail']}")


def _sqlite_triggers(cursor) -> list[tuple[str, str]]:
    cursor.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND name LIKE '%immutable'"
        " AND sql LIKE '%BEFORE UPDATE%'"
    )
    return cursor.fetchall()


def _with_permit(sql: str) -> str:
    head, begin, body = re.split(r"(\bBEGIN\b)", sql, maxsplit=1)
    when = re.search(r"\bWHEN\b", head)
    if when is None:
        head = f"{head.rstrip()} WHEN {SQLITE_CONDITION}\n"
    else:
        condition = head[when.end() :].strip()
        head = f"{head[: when.start()]}WHEN {SQLITE_CONDITION} AND ({condition})\n"
    return head + begin + body


def _sqlite_forward(cursor) -> None:
    cursor.execute("CREATE TABLE IF NOT EXISTS security_redact_permit (permit INTEGER NOT NULL)")
    for name, sql in _sqlite_triggers(cursor):
        if SQLITE_CONDITION in sql:
            continue
        cursor.execute(f'DROP TRIGGER "{name}"')
        cursor.execute(_with_permit(sql))


def _sqlite_backward(cursor) -> None:
    for name, sql in _sqlite_triggers(cursor):
        if SQLITE_CONDITION not in sql:
            continue
        head, begin, body = re.split(r"(\bBEGIN\b)", sql, maxsplit=1)
        if f"WHEN {SQLITE_CONDITION} AND (" in head:
            before, _, condition = head.partition(f"WHEN {SQLITE_CONDITION} AND (")
            head = f"{before}WHEN {condition.rstrip()[:-1]}\n"
        else:
            head = head.replace(f"WHEN {SQLITE_CONDITION}", "")
        cursor.execute(f'DROP TRIGGER "{name}"')
        cursor.execute(head + begin + body)
    cursor.execute("DROP TABLE IF EXISTS security_redact_permit")


def forward(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        if schema_editor.connection.vendor == "postgresql":
            _pg_forward(cursor)
        else:
            _sqlite_forward(cursor)


def backward(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        if schema_editor.connection.vendor == "postgresql":
            _pg_backward(cursor)
        else:
            _sqlite_backward(cursor)


class Migration(migrations.Migration):
    dependencies = [
        ("security", "0004_redaction_jobs"),
        ("conversations", "0008_message_archive_pointer"),
        ("memory", "0006_chunk_text_archived"),
        ("turns", "0002_immutable_turn_rows"),
    ]
    operations = [migrations.RunPython(forward, backward, elidable=False)]
