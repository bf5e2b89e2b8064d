"""Retention (docs/retention.md): a message's content may move to an archive segment.

`archived_in` names the segment (archive.Segment) that holds the content of a message and
of its parts. The immutability triggers of 0003 now allow exactly two changes, and only
these, to a message or a part; every other UPDATE is still refused:

- clear to archive: a message row whose `archived_in` goes from NULL to a segment and whose
  content becomes ''; then its parts' content columns become NULL (only while the message
  is archived);
- restore: its parts' content columns are filled again (only while the message is still
  archived, and only from all NULL), then the message's content comes back and
  `archived_in` goes back to NULL.

Identity columns (ids, conversation, seq, role, token count, times, external id, file ids;
a part's type, ordinal, tool call id and name, status, costs) never change.

SQLite: the gram index (0004/0006) also follows a content update, so an archived message
leaves no grams behind (its FTS5 rows already follow through 0002's update trigger).
"""

from django.db import migrations, models

CONTENT = (
    "text_content", "tool_input", "tool_output", "tool_error", "tool_title", "patch_files",
    "file_name", "file_url", "subtask_prompt", "subtask_desc", "step_reason", "metadata",
)  # fmt: skip
PART_IDENTITY = (
    "id", "message_id", "session_id", "part_type", "ordinal", "is_ignored", "is_synthetic",
    "tool_call_id", "tool_name", "tool_status", "patch_hash", "file_mime", "subtask_agent",
    "step_cost", "step_tokens_in", "step_tokens_out", "snapshot_hash", "compaction_auto",
)  # fmt: skip
MESSAGE_IDENTITY = (
    "id", "conversation_id", "seq", "role", "token_count", "created_at", "external_id",
    "file_ids",
)  # fmt: skip
UNSPACED = "[\u3040-\u30ff\u3100-\u312f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\u0e00-\u0e7f\u0e80-\u0eff\u1000-\u109f\u1780-\u17ff]"


def _same(columns, same):
    return " AND ".join(f"NEW.{c} {same} OLD.{c}" for c in columns)


def _all_null(row, columns):
    return " AND ".join(f"{row}.{c} IS NULL" for c in columns)


def _message_allowed(same):
    return f"""({_same(MESSAGE_IDENTITY, same)} AND (
        (OLD.archived_in IS NULL AND NEW.archived_in IS NOT NULL AND NEW.content = '')
        OR (OLD.archived_in IS NOT NULL AND NEW.archived_in IS NULL AND OLD.content = '')))"""


def _part_allowed(same):
    return f"""({_same(PART_IDENTITY, same)}
        AND EXISTS (SELECT 1 FROM conversations_message m
                    WHERE m.id = NEW.message_id AND m.archived_in IS NOT NULL)
        AND (({_all_null("NEW", CONTENT)}) OR ({_all_null("OLD", CONTENT)})))"""


PG = [
    "ALTER TABLE conversations_message ADD COLUMN archived_in bigint NULL",
    f"""CREATE OR REPLACE FUNCTION lcm_message_guard() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         IF {_message_allowed("IS NOT DISTINCT FROM")} THEN RETURN NEW; END IF;
         RAISE EXCEPTION 'canonical % rows are immutable', TG_TABLE_NAME
           USING ERRCODE = 'integrity_constraint_violation';
       END $$""",
    f"""CREATE OR REPLACE FUNCTION lcm_part_guard() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         IF {_part_allowed("IS NOT DISTINCT FROM")} THEN RETURN NEW; END IF;
         RAISE EXCEPTION 'canonical % rows are immutable', TG_TABLE_NAME
           USING ERRCODE = 'integrity_constraint_violation';
       END $$""",
    "DROP TRIGGER conversations_message_immutable ON conversations_message",
    "DROP TRIGGER conversations_messagepart_immutable ON conversations_messagepart",
    """CREATE TRIGGER conversations_message_immutable BEFORE UPDATE ON conversations_message
       FOR EACH ROW EXECUTE FUNCTION lcm_message_guard()""",
    """CREATE TRIGGER conversations_messagepart_immutable BEFORE UPDATE ON
       conversations_messagepart FOR EACH ROW EXECUTE FUNCTION lcm_part_guard()""",
]

SQLITE = [
    "ALTER TABLE conversations_message ADD COLUMN archived_in bigint NULL",
    "DROP TRIGGER conversations_message_immutable",
    "DROP TRIGGER conversations_messagepart_immutable",
    f"""CREATE TRIGGER conversations_message_immutable BEFORE UPDATE ON conversations_message
        WHEN NOT {_message_allowed("IS")}
        BEGIN SELECT RAISE(ABORT, 'canonical conversations_message rows are immutable'); END""",
    f"""CREATE TRIGGER conversations_messagepart_immutable BEFORE UPDATE ON
        conversations_messagepart WHEN NOT {_part_allowed("IS")}
        BEGIN SELECT RAISE(ABORT, 'canonical conversations_messagepart rows are immutable');
        END""",
    f"""CREATE TRIGGER conversations_message_cjk_au AFTER UPDATE OF content
        ON conversations_message WHEN OLD.content IS NOT NEW.content BEGIN
        DELETE FROM conversations_message_cjk WHERE message_id = OLD.id
          AND OLD.content GLOB '*{UNSPACED}*'
          AND gram IN (SELECT value FROM json_each(lcm_cjk_grams(OLD.content)));
        INSERT OR IGNORE INTO conversations_message_cjk (gram, message_id)
          SELECT value, NEW.id FROM json_each(lcm_cjk_grams(NEW.content))
          WHERE NEW.content GLOB '*{UNSPACED}*';
        END""",
]


# Back to 0007: the triggers of 0003 (refuse every UPDATE), no archive pointer.
PG_REVERSE = [
    "DROP TRIGGER conversations_message_immutable ON conversations_message",
    "DROP TRIGGER conversations_messagepart_immutable ON conversations_messagepart",
    """CREATE TRIGGER conversations_message_immutable BEFORE UPDATE ON conversations_message
       FOR EACH ROW EXECUTE FUNCTION lcm_refuse_update()""",
    """CREATE TRIGGER conversations_messagepart_immutable BEFORE UPDATE ON
       conversations_messagepart FOR EACH ROW EXECUTE FUNCTION lcm_refuse_update()""",
    "DROP FUNCTION lcm_message_guard()",
    "DROP FUNCTION lcm_part_guard()",
    "ALTER TABLE conversations_message DROP COLUMN archived_in",
]

SQLITE_REVERSE = [
    "DROP TRIGGER conversations_message_cjk_au",
    "DROP TRIGGER conversations_message_immutable",
    "DROP TRIGGER conversations_messagepart_immutable",
    *(
        f"""CREATE TRIGGER {table}_immutable BEFORE UPDATE ON {table}
        BEGIN SELECT RAISE(ABORT, 'canonical {table} rows are immutable'); END"""
        for table in ("conversations_message", "conversations_messagepart")
    ),
    "ALTER TABLE conversations_message DROP COLUMN archived_in",
]


def forward(apps, schema_editor):
    statements = PG if schema_editor.connection.vendor == "postgresql" else SQLITE
    for statement in statements:
        schema_editor.execute(statement, params=None)


def backward(apps, schema_editor):
    """Only for a database with nothing archived: a cleared row would lose its pointer."""
    # Raw SQL: the state has already lost the field when database operations run backward.
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM conversations_message WHERE archived_in IS NOT NULL LIMIT 1"
        )
        archived = cursor.fetchone() is not None
    if archived:
        raise RuntimeError("messages are archived: restore them (lcm_retention restore) first")
    vendor = schema_editor.connection.vendor
    for statement in PG_REVERSE if vendor == "postgresql" else SQLITE_REVERSE:
        schema_editor.execute(statement, params=None)


class Migration(migrations.Migration):
    dependencies = [("conversations", "0007_large_file_moved_out")]
    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunPython(forward, backward, elidable=False)
            ],
            state_operations=[
                migrations.AddField(
                    model_name="message",
                    name="archived_in",
                    field=models.BigIntegerField(
                        blank=True, null=True
                    ),
                )
            ],
        )
    ]
