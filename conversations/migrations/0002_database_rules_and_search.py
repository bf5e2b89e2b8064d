"""What the ORM cannot declare, per database.

PostgreSQL: ON DELETE RESTRICT (immediate) on every lineage and context reference;
composite foreign keys that keep lineage edges and context items inside their own
conversation; a stored tsvector with GIN index on messages and summaries; a pg_trgm
GIN index on their content for regex and substring search.

SQLite: foreign keys stay deferred (a delete of a referenced row is refused at commit);
triggers refuse cross-conversation edges and context items; FTS5 tables (word and
trigram tokenizers) kept in step with messages and summaries by triggers.
"""

from django.db import migrations

# Full text covers the first 250,000 characters of a row (a tsvector is capped at 1 MB);
# regex and substring search (trigram) cover all of it.
TSV_LIMIT = 250000

PG_FORWARD = [
    "CREATE EXTENSION IF NOT EXISTS pg_trgm",
    """
    DO $$
    DECLARE r record;
    BEGIN
      FOR r IN
        SELECT c.conname, c.conrelid::regclass AS tbl, pg_get_constraintdef(c.oid) AS def
        FROM pg_constraint c
        WHERE c.contype = 'f'
          AND c.conrelid::regclass::text IN (
            'conversations_summarymessage', 'conversations_summaryparent',
            'conversations_contextitem', 'conversations_messagepart')
      LOOP
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', r.tbl, r.conname);
        EXECUTE format('ALTER TABLE %s ADD CONSTRAINT %I %s ON DELETE RESTRICT',
                       r.tbl, r.conname, replace(r.def, ' DEFERRABLE INITIALLY DEFERRED', ''));
      END LOOP;
    END $$;
    """,
    "ALTER TABLE conversations_message ADD CONSTRAINT message_id_conversation_unique UNIQUE (id, conversation_id)",
    "ALTER TABLE conversations_summary ADD CONSTRAINT summary_id_conversation_unique UNIQUE (id, conversation_id)",
    """ALTER TABLE conversations_contextitem ADD CONSTRAINT context_item_message_same_conversation
       FOREIGN KEY (message_id, conversation_id) REFERENCES conversations_message (id, conversation_id) ON DELETE RESTRICT""",
    """ALTER TABLE conversations_contextitem ADD CONSTRAINT context_item_summary_same_conversation
       FOREIGN KEY (summary_id, conversation_id) REFERENCES conversations_summary (id, conversation_id) ON DELETE RESTRICT""",
    """ALTER TABLE conversations_summarymessage ADD CONSTRAINT summary_message_message_same_conversation
       FOREIGN KEY (message_id, conversation_id) REFERENCES conversations_message (id, conversation_id) ON DELETE RESTRICT""",
    """ALTER TABLE conversations_summarymessage ADD CONSTRAINT summary_message_summary_same_conversation
       FOREIGN KEY (summary_id, conversation_id) REFERENCES conversations_summary (id, conversation_id) ON DELETE RESTRICT""",
    """ALTER TABLE conversations_summaryparent ADD CONSTRAINT summary_parent_summary_same_conversation
       FOREIGN KEY (summary_id, conversation_id) REFERENCES conversations_summary (id, conversation_id) ON DELETE RESTRICT""",
    """ALTER TABLE conversations_summaryparent ADD CONSTRAINT summary_parent_parent_same_conversation
       FOREIGN KEY (parent_summary_id, conversation_id) REFERENCES conversations_summary (id, conversation_id) ON DELETE RESTRICT""",
    f"""ALTER TABLE conversations_message ADD COLUMN content_tsv tsvector
       GENERATED ALWAYS AS (to_tsvector('english', left(content, {TSV_LIMIT}))) STORED""",
    f"""ALTER TABLE conversations_summary ADD COLUMN content_tsv tsvector
       GENERATED ALWAYS AS (to_tsvector('english', left(content, {TSV_LIMIT}))) STORED""",
    "CREATE INDEX message_content_tsv_gin ON conversations_message USING gin (content_tsv)",
    "CREATE INDEX summary_content_tsv_gin ON conversations_summary USING gin (content_tsv)",
    "CREATE INDEX message_content_trgm ON conversations_message USING gin (content gin_trgm_ops)",
    "CREATE INDEX summary_content_trgm ON conversations_summary USING gin (content gin_trgm_ops)",
]


def _same_conversation_triggers(table, column, target, label):
    """SQLite: refuse a row whose `column` points at a `target` row of another conversation."""
    condition = (
        f"NEW.{column} IS NOT NULL AND "
        f"(SELECT conversation_id FROM {target} WHERE id = NEW.{column}) IS NOT NEW.conversation_id"
    )
    message = f"{label} points into another conversation"
    return [
        f"""CREATE TRIGGER {table}_{column}_same_conv_ins BEFORE INSERT ON {table}
            WHEN {condition} BEGIN SELECT RAISE(ABORT, '{message}'); END""",
        f"""CREATE TRIGGER {table}_{column}_same_conv_upd BEFORE UPDATE ON {table}
            WHEN {condition} BEGIN SELECT RAISE(ABORT, '{message}'); END""",
    ]


def _fts_tables(table, rowid):
    """SQLite: an external-content FTS5 index per tokenizer, kept in step by triggers."""
    statements = []
    for suffix, tokenizer in (("fts", "porter unicode61 remove_diacritics 2"), ("trgm", "trigram")):
        fts = f"{table}_{suffix}"
        statements += [
            f"""CREATE VIRTUAL TABLE {fts} USING fts5(content, content='{table}',
                content_rowid='{rowid}', tokenize='{tokenizer}')""",
            f"""CREATE TRIGGER {fts}_ai AFTER INSERT ON {table} BEGIN
                INSERT INTO {fts}(rowid, content) VALUES (new.{rowid}, new.content); END""",
            f"""CREATE TRIGGER {fts}_ad AFTER DELETE ON {table} BEGIN
                INSERT INTO {fts}({fts}, rowid, content) VALUES ('delete', old.{rowid}, old.content); END""",
            f"""CREATE TRIGGER {fts}_au AFTER UPDATE OF content ON {table} BEGIN
                INSERT INTO {fts}({fts}, rowid, content) VALUES ('delete', old.{rowid}, old.content);
                INSERT INTO {fts}(rowid, content) VALUES (new.{rowid}, new.content); END""",
        ]
    return statements


SQLITE_FORWARD = [
    *_same_conversation_triggers("conversations_contextitem", "message_id", "conversations_message", "context item"),
    *_same_conversation_triggers("conversations_contextitem", "summary_id", "conversations_summary", "context item"),
    *_same_conversation_triggers("conversations_summarymessage", "message_id", "conversations_message", "summary_messages edge"),
    *_same_conversation_triggers("conversations_summarymessage", "summary_id", "conversations_summary", "summary_messages edge"),
    *_same_conversation_triggers("conversations_summaryparent", "summary_id", "conversations_summary", "summary_parents edge"),
    *_same_conversation_triggers("conversations_summaryparent", "parent_summary_id", "conversations_summary", "summary_parents edge"),
    *_fts_tables("conversations_message", "id"),
    *_fts_tables("conversations_summary", "rowid"),
]


def forward(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    statements = {"postgresql": PG_FORWARD, "sqlite": SQLITE_FORWARD}.get(vendor)
    if statements is None:
        raise RuntimeError(f"unsupported database {vendor!r}: LCM runs on PostgreSQL or SQLite")
    for statement in statements:
        schema_editor.execute(statement, params=None)


class Migration(migrations.Migration):
    dependencies = [("conversations", "0001_initial")]
    operations = [migrations.RunPython(forward, migrations.RunPython.noop, elidable=False)]
