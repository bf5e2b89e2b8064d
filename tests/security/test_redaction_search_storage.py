"""Issue 43, item 1: a redacted token must leave the search indexes' storage too, not only
their live entries (SQLite FTS5 shadow tables; PostgreSQL GIN entries of old row
versions), verify must look there, and a job whose verify finds anything is not done."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from conversations.inputs import parse_message
from conversations.services import messages_append
from memory.indexing import index_conversation_messages
from security.models import Redaction
from security.redaction import jobs
from security.redaction.request import parse, scope_of_conversation
from security.redaction.search_storage import storage
from security.redaction.verify import verify
from tests.factories import ConversationFactory, append_messages

# Committed, as in production: inside a test's transaction SQLite's FTS5 keeps new
# entries in memory, and PostgreSQL's VACUUM cannot run.
pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = "zqvault77310000"  # one token, which the porter stemmer keeps as it is


@pytest.fixture(autouse=True)
def _policy_off(settings, data_dir):
    settings.LCM_SECRET_POLICY = "off"  # stored as sent, so there is something to redact
    settings.LCM_LEAF_CHUNK_TOKENS = 200


def _planted(owner):
    conversation = ConversationFactory(owner=owner)
    append_messages(conversation, 6)
    messages_append(
        conversation_id=conversation.pk,
        messages=[parse_message({"role": "user", "content": f"the vault pin is {TOKEN} ok"})],
    )
    append_messages(conversation, 6, start=10)
    index_conversation_messages(conversation_id=conversation.pk)
    return conversation


def fts_occurrences(token: str) -> int:
    """What the reporter counted: stored pages of any FTS5 shadow table holding the token's
    bytes, plus pages whose decoded terms hold it (a term sharing its start with the term
    before is stored as a suffix only)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND "
            "(name LIKE '%%_data' OR name LIKE '%%_idx') AND name IN "
            "(SELECT name || '_data' FROM sqlite_master WHERE sql LIKE '%%USING fts5%%' "
            " UNION SELECT name || '_idx' FROM sqlite_master WHERE sql LIKE '%%USING fts5%%')"
        )
        tables = [name for (name,) in cursor.fetchall()]
        raw = 0
        for table in tables:
            column = "block" if table.endswith("_data") else "term"
            cursor.execute(
                f'SELECT count(*) FROM "{table}" WHERE instr("{column}", %s) > 0', [token.encode()]
            )
            raw += cursor.fetchone()[0]
    return raw + len(storage().remnants([token]))


def _redact(conversation, literal: str) -> Redaction:
    request = parse({"literal": literal}, scope_of_conversation(conversation))
    return jobs.start(request, via="command")


@pytest.mark.skipif("connection.vendor != 'sqlite'")
def test_a_redacted_token_leaves_every_fts5_shadow_table(user):
    conversation = _planted(user)
    assert fts_occurrences(TOKEN) > 0

    row = _redact(conversation, TOKEN)

    assert row.state == "done", row.error
    assert fts_occurrences(TOKEN) == 0
    assert verify([TOKEN]).count == 0
    # The indexes over what it rewrote (and any other whose pages held a token: an
    # earlier test's rows, deleted, can leave a trigram of it in the summaries' index).
    assert set(row.steps["search_index"]["merged"]) >= {
        "conversations_message_fts",
        "conversations_message_trgm",
        "memory_chunk_fts",
    }


@pytest.mark.skipif("connection.vendor != 'sqlite'")
def test_verify_finds_a_token_left_in_a_deleted_fts5_entry(user):
    from security.redaction.permit import redact_permit

    conversation = _planted(user)
    message = conversation.messages.get(content__contains=TOKEN)
    with transaction.atomic(), redact_permit():  # a rewrite without the merge
        type(message).objects.filter(pk=message.pk).update(content="[redacted]")

    found = verify([TOKEN]).as_dict()["found"]

    # The word index and the trigram index (whose positions spell the text out) alike.
    assert {f["index"] for f in found if f["place"] == "search_index_storage"} >= {
        "conversations_message_fts",
        "conversations_message_trgm",
    }, found


@pytest.mark.postgres
def test_postgres_gin_indexes_keep_no_entry_of_the_redacted_versions(user):
    conversation = _planted(user)
    assert verify([TOKEN]).count > 0

    row = _redact(conversation, TOKEN)

    assert row.state == "done", row.error
    assert storage().remnants([TOKEN]) == []
    assert set(row.steps["search_index"]["vacuumed"]) >= {"conversations_message", "memory_chunk"}
    assert row.verification["places_scanned"]["search_index_storage"] >= 3


def test_a_job_whose_verify_finds_anything_ends_failed_and_resumes(user, data_dir):
    conversation = _planted(user)
    stray = data_dir / "notes" / "pasted.txt"
    stray.parent.mkdir()
    stray.write_text(f"copied by hand: {TOKEN}\n")  # a place no step reaches

    row = _redact(conversation, TOKEN)

    row.refresh_from_db()
    assert row.state == "failed"
    assert row.verification["occurrences"] == 1
    assert row.verification["found"] == [{"place": "file", "path": str(stray)}]
    assert str(stray) in row.error and TOKEN not in row.error
    assert row.sealed != "" and row.finished_at is None

    stray.unlink()
    resumed = jobs.resume(row.pk)

    assert resumed.state == "done" and resumed.verification["occurrences"] == 0
    assert resumed.sealed == ""
