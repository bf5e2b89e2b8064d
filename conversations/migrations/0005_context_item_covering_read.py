"""The context items' unique (conversation, ordinal) index carries what assembly reads.

PostgreSQL: `UNIQUE (conversation_id, ordinal) INCLUDE (token_count, message_id,
summary_id, created_at)`, so reading a conversation's context is an index-only scan. The
context table is the one that churns (compaction deletes replaced items), its heap is
sparse, and at the default random_page_cost the planner preferred a sequential scan of
all of it to 500 index lookups (issue 14: 11.8 ms -> see docs/benchmarks.md). Same
number of indexes as before: the constraint's own index is replaced.

SQLite has no INCLUDE; its unique index stays as it is (Django would otherwise rebuild
the table, dropping the triggers of migration 0002), so only the state changes there.
"""

from django.db import migrations, models

PG_FORWARD = [
    "ALTER TABLE conversations_contextitem DROP CONSTRAINT context_item_ordinal_unique",
    """ALTER TABLE conversations_contextitem ADD CONSTRAINT context_item_ordinal_unique
       UNIQUE (conversation_id, ordinal) INCLUDE (token_count, message_id, summary_id, created_at)""",
]
PG_BACKWARD = [
    "ALTER TABLE conversations_contextitem DROP CONSTRAINT context_item_ordinal_unique",
    """ALTER TABLE conversations_contextitem ADD CONSTRAINT context_item_ordinal_unique
       UNIQUE (conversation_id, ordinal)""",
]


def forward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for statement in PG_FORWARD:
            schema_editor.execute(statement, params=None)


def backward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for statement in PG_BACKWARD:
            schema_editor.execute(statement, params=None)


class Migration(migrations.Migration):
    dependencies = [("conversations", "0004_cjk_gram_index")]
    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(forward, backward, elidable=False)],
            state_operations=[
                migrations.RemoveConstraint(
                    model_name="contextitem", name="context_item_ordinal_unique"
                ),
                migrations.AddConstraint(
                    model_name="contextitem",
                    constraint=models.UniqueConstraint(
                        fields=("conversation", "ordinal"),
                        include=("token_count", "message", "summary", "created_at"),
                        name="context_item_ordinal_unique",
                    ),
                ),
            ],
        )
    ]
