"""Retention may move the text of an archived memory unit to the archive (docs/retention.md,
`archived_fulltext = archive`; memory.archived_text). A chunk's `rendered_text` and `summary`
may now change in exactly two ways, besides 0005's `fulltext_dropped_at`:

- emptied together while `text_archived_at` is set, only once its full-text row is dropped;
- put back as `text_archived_at` is cleared; PostgreSQL checks that the text's SHA-256 is the
  chunk's `content_hash` (SQLite has no SHA-256 in SQL: memory.archived_text checks it before
  writing).

While `text_archived_at` is set the text stays empty and the full-text row stays dropped.
Every other column still refuses UPDATE.
"""

import importlib

from django.db import migrations, models

_0005 = importlib.import_module("memory.migrations.0005_archived_content")
TEXT_COLUMNS = ("rendered_text", "summary")
OTHER_COLUMNS = tuple(c for c in _0005.CHUNK_COLUMNS if c not in TEXT_COLUMNS)
REFUSE = "RAISE EXCEPTION 'memory_chunk rows are immutable (only retention moves a text to the archive and back)' USING ERRCODE = 'integrity_constraint_violation';"  # noqa: E501

PG_FORWARD = [
    f"""CREATE OR REPLACE FUNCTION lcm_memory_chunk_guard_update() RETURNS trigger
       LANGUAGE plpgsql AS $$
       BEGIN
         -- TG_ARGV: the columns an UPDATE may change; the text only as below.
         IF (to_jsonb(NEW) - TG_ARGV) <> (to_jsonb(OLD) - TG_ARGV) THEN
           {REFUSE}
         END IF;
         IF NEW.text_archived_at IS NOT NULL THEN
           IF NEW.rendered_text <> '' OR NEW.summary <> '' OR NEW.fulltext_dropped_at IS NULL THEN
             {REFUSE}
           END IF;
         ELSIF OLD.text_archived_at IS NULL THEN
           IF NEW.rendered_text IS DISTINCT FROM OLD.rendered_text
              OR NEW.summary IS DISTINCT FROM OLD.summary THEN
             {REFUSE}
           END IF;
         ELSIF encode(sha256(convert_to(NEW.rendered_text, 'UTF8')), 'hex') <> NEW.content_hash THEN
           {REFUSE}
         END IF;
         RETURN NEW;
       END $$""",
    "DROP TRIGGER memory_chunk_immutable ON memory_chunk",
    "CREATE TRIGGER memory_chunk_immutable BEFORE UPDATE ON memory_chunk FOR EACH ROW "
    "EXECUTE FUNCTION lcm_memory_chunk_guard_update('fulltext_dropped_at', 'text_tsv', "
    "'text_archived_at', 'rendered_text', 'summary')",
]
PG_BACKWARD = [
    "DROP TRIGGER memory_chunk_immutable ON memory_chunk",
    "CREATE TRIGGER memory_chunk_immutable BEFORE UPDATE ON memory_chunk FOR EACH ROW "
    "EXECUTE FUNCTION lcm_memory_guard_update('fulltext_dropped_at', 'text_tsv')",
    "DROP FUNCTION lcm_memory_chunk_guard_update()",
]

_TEXT_CHANGED = " OR ".join(f"NEW.{c} IS NOT OLD.{c}" for c in TEXT_COLUMNS)
SQLITE_FORWARD = [
    "DROP TRIGGER memory_chunk_immutable",
    f"""CREATE TRIGGER memory_chunk_immutable BEFORE UPDATE ON memory_chunk
        WHEN {_0005._changed(OTHER_COLUMNS)}
          OR (NEW.text_archived_at IS NOT NULL AND (NEW.rendered_text <> ''
              OR NEW.summary <> '' OR NEW.fulltext_dropped_at IS NULL))
          OR (OLD.text_archived_at IS NULL AND NEW.text_archived_at IS NULL
              AND ({_TEXT_CHANGED}))
        BEGIN SELECT RAISE(ABORT, 'memory_chunk rows are immutable'); END""",
]
SQLITE_BACKWARD = [
    "DROP TRIGGER memory_chunk_immutable",
    f"""CREATE TRIGGER memory_chunk_immutable BEFORE UPDATE ON memory_chunk
        WHEN {_0005._changed(_0005.CHUNK_COLUMNS)}
        BEGIN SELECT RAISE(ABORT, 'memory_chunk rows are immutable'); END""",
]


def forward(apps, schema_editor):
    postgres = schema_editor.connection.vendor == "postgresql"
    for statement in PG_FORWARD if postgres else SQLITE_FORWARD:
        schema_editor.execute(statement, params=None)


def backward(apps, schema_editor):
    Chunk = apps.get_model("memory", "Chunk")
    if Chunk.objects.filter(text_archived_at__isnull=False).exists():
        raise RuntimeError(
            "memory 0006 cannot migrate back while memory units keep their text in the "
            "archive: set archived_fulltext to keep or drop and run `manage.py lcm_retention "
            "apply` first (it puts the text back)"
        )
    postgres = schema_editor.connection.vendor == "postgresql"
    for statement in PG_BACKWARD if postgres else SQLITE_BACKWARD:
        schema_editor.execute(statement, params=None)


class Migration(migrations.Migration):
    dependencies = [("memory", "0005_archived_content")]

    operations = [
        migrations.AddField(
            model_name="chunk",
            name="text_archived_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunPython(forward, backward, elidable=False),
    ]
