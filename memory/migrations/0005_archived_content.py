"""Retention may compress the vectors of archived content and drop its full-text rows
(docs/retention.md, memory.archived). Chunks and vectors stay immutable except for exactly
these two changes:

- `memory_chunkvector.vector` may be rewritten (float32 -> float16 or int8 and back to
  float32 on restore; memory.vectors.codec);
- `memory_chunk.fulltext_dropped_at` may be set or cleared. While it is set the chunk has no
  full-text row: PostgreSQL's generated `text_tsv` is NULL (the column is re-made with that
  condition, which rewrites the table once), SQLite's FTS5 row is deleted by a trigger and
  put back by another when the column is cleared.

Every other column still refuses UPDATE (the trigger compares them all).
"""

from django.db import migrations, models

CHUNK_COLUMNS = (
    "id", "conversation_id", "session_id", "branch_id", "source_turn_id", "source_key",
    "seq_start", "seq_end", "start_offset", "end_offset", "chunk_type", "rendered_text",
    "summary", "token_est", "content_hash", "source_created_at", "created_at",
)  # fmt: skip
VECTOR_COLUMNS = ("id", "namespace_id", "chunk_id", "created_at")
TSV = "to_tsvector('english', rendered_text)"
# The lengths of a vector of `dim` components in each format (memory.vectors.codec): a new
# vector must be the same vector in another format, at least by its size.
_LENGTHS = "4 * {dim}, 2 * {dim} + 4, {dim} + 8"

PG_FORWARD = [
    """CREATE OR REPLACE FUNCTION lcm_memory_guard_update() RETURNS trigger
       LANGUAGE plpgsql AS $$
       BEGIN
         -- TG_ARGV: the columns an UPDATE may change; any other change is refused.
         IF (to_jsonb(NEW) - TG_ARGV) = (to_jsonb(OLD) - TG_ARGV) THEN
           RETURN NEW;
         END IF;
         RAISE EXCEPTION '% rows are immutable', TG_TABLE_NAME
           USING ERRCODE = 'integrity_constraint_violation';
       END $$""",
    "DROP TRIGGER memory_chunk_immutable ON memory_chunk",
    "CREATE TRIGGER memory_chunk_immutable BEFORE UPDATE ON memory_chunk FOR EACH ROW "
    "EXECUTE FUNCTION lcm_memory_guard_update('fulltext_dropped_at', 'text_tsv')",
    f"""CREATE OR REPLACE FUNCTION lcm_memory_vector_guard_update() RETURNS trigger
       LANGUAGE plpgsql AS $$
       DECLARE
         d integer;
       BEGIN
         SELECT dim INTO d FROM memory_embeddingnamespace WHERE id = OLD.namespace_id;
         IF (to_jsonb(NEW) - 'vector') = (to_jsonb(OLD) - 'vector')
            AND octet_length(NEW.vector) IN ({_LENGTHS.format(dim="d")}) THEN
           RETURN NEW;
         END IF;
         RAISE EXCEPTION '% rows are immutable (only a vector''s format may change)',
           TG_TABLE_NAME USING ERRCODE = 'integrity_constraint_violation';
       END $$""",
    "DROP TRIGGER memory_chunkvector_immutable ON memory_chunkvector",
    "CREATE TRIGGER memory_chunkvector_immutable BEFORE UPDATE ON memory_chunkvector "
    "FOR EACH ROW EXECUTE FUNCTION lcm_memory_vector_guard_update()",
    "ALTER TABLE memory_chunk DROP COLUMN text_tsv",
    f"""ALTER TABLE memory_chunk ADD COLUMN text_tsv tsvector GENERATED ALWAYS AS
       (CASE WHEN fulltext_dropped_at IS NULL THEN {TSV} END) STORED""",
    "CREATE INDEX chunk_text_tsv_gin ON memory_chunk USING gin (text_tsv)",
]
PG_BACKWARD = [
    "DROP TRIGGER memory_chunk_immutable ON memory_chunk",
    "DROP TRIGGER memory_chunkvector_immutable ON memory_chunkvector",
    *(
        f"CREATE TRIGGER {table}_immutable BEFORE UPDATE ON {table} "
        "FOR EACH ROW EXECUTE FUNCTION lcm_memory_refuse_update()"
        for table in ("memory_chunk", "memory_chunkvector")
    ),
    "DROP FUNCTION lcm_memory_guard_update()",
    "DROP FUNCTION lcm_memory_vector_guard_update()",
    "ALTER TABLE memory_chunk DROP COLUMN text_tsv",
    f"ALTER TABLE memory_chunk ADD COLUMN text_tsv tsvector GENERATED ALWAYS AS ({TSV}) STORED",
    "CREATE INDEX chunk_text_tsv_gin ON memory_chunk USING gin (text_tsv)",
]


_SQLITE_LENGTHS = " UNION ALL ".join(
    f"SELECT {length} FROM memory_embeddingnamespace WHERE id = NEW.namespace_id"
    for length in _LENGTHS.format(dim="dim").split(", ")
)


def _changed(columns) -> str:
    return " OR ".join(f"NEW.{c} IS NOT OLD.{c}" for c in columns)


SQLITE_FORWARD = [
    "DROP TRIGGER memory_chunk_immutable",
    f"""CREATE TRIGGER memory_chunk_immutable BEFORE UPDATE ON memory_chunk
        WHEN {_changed(CHUNK_COLUMNS)}
        BEGIN SELECT RAISE(ABORT, 'memory_chunk rows are immutable'); END""",
    "DROP TRIGGER memory_chunkvector_immutable",
    f"""CREATE TRIGGER memory_chunkvector_immutable BEFORE UPDATE ON memory_chunkvector
        WHEN {_changed(VECTOR_COLUMNS)} OR length(NEW.vector) NOT IN ({_SQLITE_LENGTHS})
        BEGIN SELECT RAISE(ABORT, 'memory_chunkvector rows are immutable'); END""",
    # A chunk without a full-text row must not send FTS5 a 'delete' for it (that corrupts
    # an external-content index).
    "DROP TRIGGER memory_chunk_fts_ad",
    """CREATE TRIGGER memory_chunk_fts_ad AFTER DELETE ON memory_chunk
       WHEN old.fulltext_dropped_at IS NULL BEGIN
       INSERT INTO memory_chunk_fts(memory_chunk_fts, rowid, rendered_text)
       VALUES ('delete', old.rowid, old.rendered_text); END""",
    """CREATE TRIGGER memory_chunk_fts_drop AFTER UPDATE OF fulltext_dropped_at ON memory_chunk
       WHEN old.fulltext_dropped_at IS NULL AND new.fulltext_dropped_at IS NOT NULL BEGIN
       INSERT INTO memory_chunk_fts(memory_chunk_fts, rowid, rendered_text)
       VALUES ('delete', old.rowid, old.rendered_text); END""",
    """CREATE TRIGGER memory_chunk_fts_undrop AFTER UPDATE OF fulltext_dropped_at ON memory_chunk
       WHEN old.fulltext_dropped_at IS NOT NULL AND new.fulltext_dropped_at IS NULL BEGIN
       INSERT INTO memory_chunk_fts(rowid, rendered_text) VALUES (new.rowid, new.rendered_text);
       END""",
]
SQLITE_BACKWARD = [
    "DROP TRIGGER memory_chunk_fts_drop",
    "DROP TRIGGER memory_chunk_fts_undrop",
    "DROP TRIGGER memory_chunk_fts_ad",
    """CREATE TRIGGER memory_chunk_fts_ad AFTER DELETE ON memory_chunk BEGIN
       INSERT INTO memory_chunk_fts(memory_chunk_fts, rowid, rendered_text)
       VALUES ('delete', old.rowid, old.rendered_text); END""",
    *(
        f"DROP TRIGGER {table}_immutable" for table in ("memory_chunk", "memory_chunkvector")
    ),
    *(
        f"""CREATE TRIGGER {table}_immutable BEFORE UPDATE ON {table}
            BEGIN SELECT RAISE(ABORT, '{table} rows are immutable'); END"""
        for table in ("memory_chunk", "memory_chunkvector")
    ),
]


def forward(apps, schema_editor):
    postgres = schema_editor.connection.vendor == "postgresql"
    for statement in PG_FORWARD if postgres else SQLITE_FORWARD:
        schema_editor.execute(statement, params=None)


def backward(apps, schema_editor):
    Chunk = apps.get_model("memory", "Chunk")
    ChunkVector = apps.get_model("memory", "ChunkVector")
    compressed = ChunkVector.objects.extra(
        where=["length(vector) <> 4 * (SELECT dim FROM memory_embeddingnamespace n "
               "WHERE n.id = memory_chunkvector.namespace_id)"]
    )  # fmt: skip
    if Chunk.objects.filter(fulltext_dropped_at__isnull=False).exists() or compressed.exists():
        raise RuntimeError(
            "memory 0005 cannot migrate back while archived content has compressed vectors "
            "or dropped full-text rows: restore it first (manage.py lcm_retention restore)"
        )
    postgres = schema_editor.connection.vendor == "postgresql"
    for statement in PG_BACKWARD if postgres else SQLITE_BACKWARD:
        schema_editor.execute(statement, params=None)


class Migration(migrations.Migration):
    dependencies = [("memory", "0004_index_cursor_queued_at")]

    operations = [
        migrations.AddField(
            model_name="chunk",
            name="fulltext_dropped_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunPython(forward, backward, elidable=False),
    ]
