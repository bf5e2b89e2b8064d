"""Search storage: the full-text and trigram indexes the database keeps for messages and
summaries. A row is findable through the one search interface as soon as it is written,
including from another connection after commit; the indexes exist where the migration
says and stay in step with the rows."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from conversations.inputs import parse_message
from conversations.models import Summary
from conversations.search import GrepQuery, Scope, search_backend
from conversations.services import messages_append
from tests.factories import append_messages
from tests.support.concurrent import run_together

NOW = timezone.now()


def _append(conversation, content: str, **kwargs):
    [result] = messages_append(
        conversation_id=conversation.pk,
        messages=[parse_message({"role": "user", "content": content, **kwargs})],
    )
    return result.message


def _summary(conversation, suffix: str, content: str) -> Summary:
    return Summary.objects.create(
        id=f"sum_{suffix:0>16}",
        conversation=conversation,
        kind="leaf",
        depth=0,
        content=content,
        token_count=10,
        earliest_at=NOW - timedelta(minutes=5),
        latest_at=NOW,
        created_at=NOW,
    )


def _ids(table: str, query: str, conversation, mode: str = "full_text") -> list:
    q = GrepQuery(query=query, mode=mode, scope=Scope(conversation_ids=(conversation.pk,)))
    return [hit.id for hit in search_backend().search(table, q)]


# --- through the interface ---------------------------------------------------------------


def test_a_message_is_findable_by_word_right_after_it_is_appended(conversation):
    append_messages(conversation, 20)
    message = _append(conversation, "The deployment of the payments gateway failed overnight")
    assert _ids("message", "gateway", conversation) == [message.pk]
    # Stemmed on both backends (english / porter): "failing payment" finds "payments ... failed".
    assert _ids("message", "failing payment", conversation) == [message.pk]


def test_a_message_is_findable_by_substring_right_after_it_is_appended(conversation):
    message = _append(conversation, "error code XQZ-4471 in worker_pool.py line 88")
    assert _ids("message", "QZ-447", conversation, mode="regex") == [message.pk]
    assert _ids("message", r"worker_pool\.py", conversation, mode="regex") == [message.pk]


def test_a_message_built_from_parts_is_findable_by_its_tool_output(conversation):
    message = _append(
        conversation,
        "",
        parts=[
            {
                "part_type": "tool",
                "tool_name": "bash",
                "tool_output": "Segmentation fault in libquux.so",
            }
        ],
    )
    assert _ids("message", "libquux", conversation, mode="regex") == [message.pk]
    assert _ids("message", "segmentation", conversation) == [message.pk]


def test_a_summary_is_findable_right_after_it_is_written(conversation):
    summary = _summary(conversation, "s1", "The team migrated the billing ledger to PostgreSQL")
    assert _ids("summary", "ledger", conversation) == [summary.id]
    assert _ids("summary", "billing ledger", conversation) == [summary.id]
    assert _ids("summary", "ing ledg", conversation, mode="regex") == [summary.id]


@pytest.mark.parametrize(
    ("text", "query"),
    [
        ("我们的数据库连接在凌晨三点失败了", "数据库连接"),
        ("東京のサーバーが再起動しました", "サーバー"),
        ("서버가 다시 시작되었습니다", "다시 시작"),
    ],
    ids=["chinese", "japanese", "korean"],
)
def test_a_cjk_substring_finds_messages_and_summaries(conversation, text, query):
    message = _append(conversation, text)
    summary = _summary(conversation, "cjk", text)
    _append(conversation, "unrelated English text")
    for mode in ("full_text", "regex"):
        assert _ids("message", query, conversation, mode=mode) == [message.pk], mode
        assert _ids("summary", query, conversation, mode=mode) == [summary.id], mode


@pytest.mark.parametrize(
    "query",
    [
        '"',
        "(",
        ")",
        "*",
        "-",
        ":",
        "OR",
        "AND",
        "NOT",
        "NEAR",
        "a OR b",
        '"unbalanced',
        "-x",
        "col:x",
        "^",
        "'",
        "\\",
        "%",
        "_",
        "!",
        "&",
        "|",
        "<->",
        "x*",
        "()",
    ],
)
def test_query_syntax_characters_never_raise_in_full_text(conversation, query):
    _append(conversation, "plain words only")
    _summary(conversation, "syn", "plain words only")
    for table in ("message", "summary"):
        assert _ids(table, query, conversation) == []


def test_syntax_characters_inside_the_text_are_findable_literally(conversation):
    message = _append(conversation, 'run "make test" (tomorrow) -- OR not: x*y')
    assert _ids("message", '"make', conversation) == [message.pk]
    assert _ids("message", "(tomorrow)", conversation) == [message.pk]


def test_search_is_scoped_to_the_conversation(conversation, make_conversation):
    other = make_conversation(session_id="elsewhere")
    mine = _append(conversation, "shared keyword zebra")
    _append(other, "shared keyword zebra")
    assert _ids("message", "zebra", conversation) == [mine.pk]
    assert _ids("message", "zebra", conversation, mode="regex") == [mine.pk]


def test_a_committed_message_is_findable_from_another_connection(transactional_db, user):
    from tests.factories import ConversationFactory

    conversation = ConversationFactory(owner=user)
    message = _append(conversation, "committed ocelot sighting")
    summary = _summary(conversation, "tx", "committed ocelot summary")
    found: dict = {}

    def search_in_a_new_connection():
        found["message"] = _ids("message", "ocelot", conversation)
        found["message_regex"] = _ids("message", "celot sig", conversation, mode="regex")
        found["summary"] = _ids("summary", "ocelot", conversation)

    run_together(search_in_a_new_connection, timeout=30)
    assert found == {
        "message": [message.pk],
        "message_regex": [message.pk],
        "summary": [summary.id],
    }


# --- the storage itself ------------------------------------------------------------------


def _sqlite_only():
    if connection.vendor != "sqlite":
        pytest.skip("SQLite storage check (the PostgreSQL counterpart is marked postgres)")


def test_sqlite_fts_tables_index_every_new_row(conversation):
    _sqlite_only()
    messages = append_messages(conversation, 30)
    summary = _summary(conversation, "ix", "indexed summary text about kangaroos")
    with connection.cursor() as cursor:
        for suffix in ("fts", "trgm"):
            cursor.execute(
                f"SELECT rowid FROM conversations_message_{suffix} "
                f"WHERE conversations_message_{suffix} MATCH %s ORDER BY rowid",
                ['"Message"'],
            )
            assert [r[0] for r in cursor.fetchall()] == [m.pk for m in messages], suffix
            cursor.execute(
                f"SELECT t.id FROM conversations_summary_{suffix} f "
                f"JOIN conversations_summary t ON t.rowid = f.rowid "
                f"WHERE conversations_summary_{suffix} MATCH %s",
                ['"kangaroos"'],
            )
            assert [r[0] for r in cursor.fetchall()] == [summary.id], suffix


def test_sqlite_fts_indexes_are_consistent_with_their_tables(conversation):
    _sqlite_only()
    append_messages(conversation, 50)
    _summary(conversation, "c1", "first summary")
    _summary(conversation, "c2", "second summary")
    with connection.cursor() as cursor:
        for table in ("conversations_message", "conversations_summary"):
            for suffix in ("fts", "trgm"):
                fts = f"{table}_{suffix}"
                # Raises "database disk image is malformed" when index and rows disagree.
                cursor.execute(f"INSERT INTO {fts}({fts}, rank) VALUES ('integrity-check', 1)")
            cursor.execute(f"SELECT count(*) FROM {table}_fts_docsize")
            assert cursor.fetchone()[0] == (50 if table == "conversations_message" else 2)


@pytest.mark.postgres
def test_postgres_stores_a_tsvector_for_every_message_and_summary(conversation):
    append_messages(conversation, 10)
    summary = _summary(conversation, "pg", "The ledger was reconciled")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM conversations_message "
            "WHERE conversation_id = %s AND content_tsv IS NOT NULL AND content_tsv <> ''::tsvector",
            [conversation.pk],
        )
        assert cursor.fetchone()[0] == 10
        cursor.execute(
            "SELECT content_tsv::text FROM conversations_summary WHERE id = %s", [summary.id]
        )
        assert cursor.fetchone()[0] == "'ledger':2 'reconcil':4"


@pytest.mark.postgres
def test_postgres_has_the_search_indexes_and_the_trigram_extension(db):
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'")
        assert cursor.fetchone() == (1,)
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE indexname IN "
            "('message_content_tsv_gin', 'summary_content_tsv_gin', "
            "'message_content_trgm', 'summary_content_trgm') ORDER BY indexname"
        )
        rows = dict(cursor.fetchall())
    assert sorted(rows) == [
        "message_content_trgm",
        "message_content_tsv_gin",
        "summary_content_trgm",
        "summary_content_tsv_gin",
    ]
    assert "gin (content gin_trgm_ops)" in rows["message_content_trgm"]
    assert "gin (content_tsv)" in rows["summary_content_tsv_gin"]


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("predicate", "index"),
    [
        ("content ILIKE '%%gateway%%'", "message_content_trgm"),
        ("content ~ 'gate.ay'", "message_content_trgm"),
        ("content_tsv @@ websearch_to_tsquery('english', 'gateway')", "message_content_tsv_gin"),
    ],
)
def test_postgres_substring_regex_and_full_text_can_use_an_index(conversation, predicate, index):
    append_messages(conversation, 50)
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN SELECT id FROM conversations_message WHERE {predicate}")
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert index in plan, plan
