"""Canonical rows refuse DELETE, except inside the hard-delete service's transaction.

Messages, parts, summaries, lineage edges, conversations, memory chunks and vectors
(and, since turns migration 0002, states, turns and steps) are never deleted by anything
but `security.hard_delete` (SRD 14.4). The bypass is scoped to that one transaction:

- PostgreSQL: the trigger lets a DELETE through only while the session-local setting
  `lcm.hard_delete` is 'on'; the service sets it with `SET LOCAL`, which ends with its
  transaction. `lcm_turns_refuse_delete()` (turns 0002) is replaced by the same check.
  `TRUNCATE` (the test harness's flush) fires no row trigger.
- SQLite: the trigger stands aside while a row sits in `turns_delete_permit` (turns
  0002); the service inserts that row and removes it again inside its own IMMEDIATE
  transaction, so no other connection ever sees it. The test harness's flush holds the
  same permit (tests/conftest.py).
"""

from django.db import migrations

TABLES = (
    "conversations_conversation",
    "conversations_message",
    "conversations_messagepart",
    "conversations_summary",
    "conversations_summarymessage",
    "conversations_summaryparent",
    "memory_chunk",
    "memory_chunkvector",
)

_ALLOWED = "coalesce(current_setting('lcm.hard_delete', true), '') = 'on'"

PG = [
    f"""CREATE OR REPLACE FUNCTION lcm_refuse_delete() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         IF {_ALLOWED} THEN
           RETURN OLD;
         END IF;
         RAISE EXCEPTION 'canonical % rows are never deleted (only by hard delete)',
           TG_TABLE_NAME USING ERRCODE = 'integrity_constraint_violation';
       END $$""",
    *(
        f"CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table} "
        "FOR EACH ROW EXECUTE FUNCTION lcm_refuse_delete()"
        for table in TABLES
    ),
    f"""CREATE OR REPLACE FUNCTION lcm_turns_refuse_delete() RETURNS trigger
       LANGUAGE plpgsql AS $$
       BEGIN
         IF {_ALLOWED} THEN
           RETURN OLD;
         END IF;
         RAISE EXCEPTION '% rows are never deleted', TG_TABLE_NAME
           USING ERRCODE = 'integrity_constraint_violation';
       END $$""",
]

SQLITE = [
    "CREATE TABLE IF NOT EXISTS turns_delete_permit (permit INTEGER NOT NULL)",
    *(
        f"""CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table}
            WHEN NOT EXISTS (SELECT 1 FROM turns_delete_permit)
            BEGIN SELECT RAISE(ABORT,
              'canonical {table} rows are never deleted (only by hard delete)'); END"""
        for table in TABLES
    ),
]


def forward(apps, schema_editor):
    statements = PG if schema_editor.connection.vendor == "postgresql" else SQLITE
    for statement in statements:
        schema_editor.execute(statement, params=None)


class Migration(migrations.Migration):
    dependencies = [
        ("security", "0001_initial"),
        ("conversations", "0003_immutable_canonical_rows"),
        ("turns", "0002_immutable_turn_rows"),
        ("memory", "0002_immutable_rows_and_search"),
    ]
    operations = [migrations.RunPython(forward, migrations.RunPython.noop, elidable=False)]
