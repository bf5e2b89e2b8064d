"""Canonical rows refuse UPDATE, on both databases.

Messages, their parts, summaries and lineage edges are written once and never changed
(no service, API, admin page or job updates them); these triggers make the database
refuse it too, so no future code path can rewrite history by accident. DELETE is already
refused through ON DELETE RESTRICT / deferred foreign keys for every referenced row.
"""

from django.db import migrations

TABLES = (
    "conversations_message",
    "conversations_messagepart",
    "conversations_summary",
    "conversations_summarymessage",
    "conversations_summaryparent",
)

PG = [
    """CREATE OR REPLACE FUNCTION lcm_refuse_update() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         RAISE EXCEPTION 'canonical % rows are immutable', TG_TABLE_NAME
           USING ERRCODE = 'integrity_constraint_violation';
       END $$""",
    *(
        f"CREATE TRIGGER {table}_immutable BEFORE UPDATE ON {table} "
        "FOR EACH ROW EXECUTE FUNCTION lcm_refuse_update()"
        for table in TABLES
    ),
]

SQLITE = [
    f"""CREATE TRIGGER {table}_immutable BEFORE UPDATE ON {table}
        BEGIN SELECT RAISE(ABORT, 'canonical {table} rows are immutable'); END"""
    for table in TABLES
]


def forward(apps, schema_editor):
    statements = PG if schema_editor.connection.vendor == "postgresql" else SQLITE
    for statement in statements:
        schema_editor.execute(statement, params=None)


class Migration(migrations.Migration):
    dependencies = [("conversations", "0002_database_rules_and_search")]
    operations = [migrations.RunPython(forward, migrations.RunPython.noop, elidable=False)]
