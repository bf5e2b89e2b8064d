"""Chunks and vectors refuse UPDATE (immutable, like the canonical tables); chunks get a
full-text index for the hybrid search's full-text leg.

PostgreSQL: a stored tsvector with a GIN index. SQLite: an external-content FTS5 table
kept in step by triggers (porter/unicode61, the same tokenizer as message search).
"""

from django.db import migrations

TABLES = ("memory_chunk", "memory_chunkvector")

PG = [
    """CREATE OR REPLACE FUNCTION lcm_memory_refuse_update() RETURNS trigger
       LANGUAGE plpgsql AS $$
       BEGIN
         RAISE EXCEPTION '% rows are immutable', TG_TABLE_NAME
           USING ERRCODE = 'integrity_constraint_violation';
       END $$""",
    *(
        f"CREATE TRIGGER {table}_immutable BEFORE UPDATE ON {table} "
        "FOR EACH ROW EXECUTE FUNCTION lcm_memory_refuse_update()"
        for table in TABLES
    ),
    """ALTER TABLE memory_chunk ADD COLUMN text_tsv tsvector
       GENERATED ALWAYS AS (to_tsvector('english', rendered_text)) STORED""",
    "CREATE INDEX chunk_text_tsv_gin ON memory_chunk USING gin (text_tsv)",
]

SQLITE = [
    *(
        f"""CREATE TRIGGER {table}_immutable BEFORE UPDATE ON {table}
            BEGIN SELECT RAISE(ABORT, '{table} rows are immutable'); END"""
        for table in TABLES
    ),
    """CREATE VIRTUAL TABLE memory_chunk_fts USING fts5(rendered_text,
       content='memory_chunk', content_rowid='rowid',
       tokenize='porter unicode61 remove_diacritics 2')""",
    """CREATE TRIGGER memory_chunk_fts_ai AFTER INSERT ON memory_chunk BEGIN
       INSERT INTO memory_chunk_fts(rowid, rendered_text) VALUES (new.rowid, new.rendered_text);
       END""",
    """CREATE TRIGGER memory_chunk_fts_ad AFTER DELETE ON memory_chunk BEGIN
       INSERT INTO memory_chunk_fts(memory_chunk_fts, rowid, rendered_text)
       VALUES ('delete', old.rowid, old.rendered_text); END""",
]


def forward(apps, schema_editor):
    statements = PG if schema_editor.connection.vendor == "postgresql" else SQLITE
    for statement in statements:
        schema_editor.execute(statement, params=None)


class Migration(migrations.Migration):
    dependencies = [("memory", "0001_initial")]
    operations = [migrations.RunPython(forward, migrations.RunPython.noop, elidable=False)]
