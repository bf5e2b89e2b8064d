"""SQLite: the gram-index triggers (0004) skip pure-ASCII text before their GLOB.

The GLOB over the unspaced-script ranges ran on every inserted message and summary and
cost about 50 µs per message of the reference workload (docs/benchmarks.md), although
most text holds no such script. `length(CAST(x AS BLOB)) <> length(x)` is true only for
text with a character outside ASCII (UTF-8 then has more bytes than characters) and is
one pass over the bytes in C; the GLOB then decides as before, so the same rows are
indexed. PostgreSQL: nothing to do (its generated column is unchanged).
"""

from django.db import migrations

# As in 0004 (a migration keeps its own copy: later code may change).
UNSPACED = "[\u3040-\u30ff\u3100-\u312f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\u0e00-\u0e7f\u0e80-\u0eff\u1000-\u109f\u1780-\u17ff]"
TABLES = (
    ("conversations_message", "id", "message_id"),
    ("conversations_summary", "rowid", "summary_rowid"),
)


def _triggers(ascii_prefilter: bool) -> list[str]:
    statements = []
    for table, rowid, column in TABLES:
        side = f"{table}_cjk"
        holds = f"{{row}}.content GLOB '*{UNSPACED}*'"
        if ascii_prefilter:
            holds = (
                "length(CAST({row}.content AS BLOB)) <> length({row}.content) AND " + holds
            )
        grams = "SELECT value FROM json_each(lcm_cjk_grams({row}.content))"
        statements += [
            f"DROP TRIGGER IF EXISTS {side}_ai",
            f"DROP TRIGGER IF EXISTS {side}_ad",
            f"""CREATE TRIGGER {side}_ai AFTER INSERT ON {table} WHEN {holds.format(row="new")}
            BEGIN INSERT OR IGNORE INTO {side} (gram, {column})
            SELECT value, new.{rowid} FROM json_each(lcm_cjk_grams(new.content)); END""",
            f"""CREATE TRIGGER {side}_ad AFTER DELETE ON {table} WHEN {holds.format(row="old")}
            BEGIN DELETE FROM {side} WHERE {column} = old.{rowid}
            AND gram IN ({grams.format(row="old")}); END""",
        ]
    return statements


def forward(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        for statement in _triggers(ascii_prefilter=True):
            schema_editor.execute(statement, params=None)


def backward(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        for statement in _triggers(ascii_prefilter=False):
            schema_editor.execute(statement, params=None)


class Migration(migrations.Migration):
    dependencies = [("conversations", "0005_context_item_covering_read")]
    operations = [migrations.RunPython(forward, backward, elidable=False)]
