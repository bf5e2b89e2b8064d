"""An exact index for 1-2 character words of unspaced scripts (CJK, Thai, ...).

A trigram index cannot serve a word shorter than three characters, so before this a 1-2
character CJK word scanned every row in scope. PostgreSQL: a stored generated column
`content_cjk` holds every character and every pair of adjacent characters of the
unspaced-script runs of the content (NULL when there are none), with a GIN index. The
database computes it in the inserting statement itself, so it is filled in the same
transaction on every write path (ORM, COPY, import) and needs no coordination between
concurrent writers. Search keeps its LIKE on the content, so the index only narrows the
rows to check and a match is never missed.

Adding a stored column rewrites the message and summary tables once (an exclusive lock
for the duration: about a second per 100,000 rows on the benchmark machine).

SQLite: a side table per searched table, (gram, row) as a WITHOUT ROWID primary key,
kept in step by triggers in the inserting transaction (writers are serialised by SQLite
itself). The triggers fire only for text holding such a script (a GLOB on the same
ranges) and call `lcm_cjk_grams`, registered on every connection
(conversations/search/grams.py); existing rows are indexed here.
"""

from django.db import migrations

# The ranges of conversations.search.text._NO_SPACE_SCRIPTS (hiragana/katakana, bopomofo,
# CJK ideographs and extension A, hangul syllables, compatibility ideographs, Thai, Lao,
# Myanmar, Khmer).
UNSPACED = "[\u3040-\u30ff\u3100-\u312f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\u0e00-\u0e7f\u0e80-\u0eff\u1000-\u109f\u1780-\u17ff]"

PG_FUNCTION = f"""
CREATE OR REPLACE FUNCTION lcm_cjk_grams(content text) RETURNS text[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT CASE WHEN content ~ '{UNSPACED}' THEN ARRAY(
    SELECT DISTINCT substr(run.r[1], i, n)
    FROM regexp_matches(content, '{UNSPACED}+', 'g') AS run(r),
         generate_series(1, length(run.r[1])) AS i,
         (VALUES (1), (2)) AS width(n)
    WHERE i + n - 1 <= length(run.r[1])
  ) END
$$"""

PG_FORWARD = [
    PG_FUNCTION,
    """ALTER TABLE conversations_message ADD COLUMN content_cjk text[]
       GENERATED ALWAYS AS (lcm_cjk_grams(content)) STORED""",
    """ALTER TABLE conversations_summary ADD COLUMN content_cjk text[]
       GENERATED ALWAYS AS (lcm_cjk_grams(content)) STORED""",
    """CREATE INDEX message_content_cjk_gin ON conversations_message USING gin (content_cjk)
       WHERE content_cjk IS NOT NULL""",
    """CREATE INDEX summary_content_cjk_gin ON conversations_summary USING gin (content_cjk)
       WHERE content_cjk IS NOT NULL""",
]

PG_BACKWARD = [
    "DROP INDEX IF EXISTS message_content_cjk_gin",
    "DROP INDEX IF EXISTS summary_content_cjk_gin",
    "ALTER TABLE conversations_message DROP COLUMN IF EXISTS content_cjk",
    "ALTER TABLE conversations_summary DROP COLUMN IF EXISTS content_cjk",
    "DROP FUNCTION IF EXISTS lcm_cjk_grams(text)",
]



def _sqlite_side_table(table: str, rowid: str, column: str) -> list[str]:
    side = f"{table}_cjk"
    grams = "SELECT value FROM json_each(lcm_cjk_grams({row}.content))"
    holds = f"{{row}}.content GLOB '*{UNSPACED}*'"
    return [
        f"""CREATE TABLE {side} (gram TEXT NOT NULL, {column} INTEGER NOT NULL,
            PRIMARY KEY (gram, {column})) WITHOUT ROWID""",
        f"""CREATE TRIGGER {side}_ai AFTER INSERT ON {table} WHEN {holds.format(row="new")}
            BEGIN INSERT OR IGNORE INTO {side} (gram, {column})
            SELECT value, new.{rowid} FROM json_each(lcm_cjk_grams(new.content)); END""",
        f"""CREATE TRIGGER {side}_ad AFTER DELETE ON {table} WHEN {holds.format(row="old")}
            BEGIN DELETE FROM {side} WHERE {column} = old.{rowid}
            AND gram IN ({grams.format(row="old")}); END""",
        f"""INSERT OR IGNORE INTO {side} (gram, {column})
            SELECT g.value, t.{rowid} FROM {table} t, json_each(lcm_cjk_grams(t.content)) g
            WHERE {holds.format(row="t")}""",
    ]


SQLITE_FORWARD = [
    *_sqlite_side_table("conversations_message", "id", "message_id"),
    *_sqlite_side_table("conversations_summary", "rowid", "summary_rowid"),
]

SQLITE_BACKWARD = [
    f"DROP {kind} IF EXISTS {table}_cjk{suffix}"
    for table in ("conversations_message", "conversations_summary")
    for kind, suffix in (("TRIGGER", "_ai"), ("TRIGGER", "_ad"), ("TABLE", ""))
]


def _statements(schema_editor, forward: bool) -> list[str]:
    if schema_editor.connection.vendor == "postgresql":
        return PG_FORWARD if forward else PG_BACKWARD
    from conversations.search.grams import register

    register(connection=schema_editor.connection)  # the backfill calls lcm_cjk_grams
    return SQLITE_FORWARD if forward else SQLITE_BACKWARD


def forward(apps, schema_editor):
    for statement in _statements(schema_editor, forward=True):
        schema_editor.execute(statement, params=None)


def backward(apps, schema_editor):
    for statement in _statements(schema_editor, forward=False):
        schema_editor.execute(statement, params=None)


class Migration(migrations.Migration):
    dependencies = [("conversations", "0003_immutable_canonical_rows")]
    operations = [migrations.RunPython(forward, backward, elidable=False)]
