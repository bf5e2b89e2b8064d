"""Importing the real lossless-claw 0.15.3 database (vendored in
tests/importers/fixtures/lossless-claw-0.15.3): counts, lineage, search, integrity,
idempotency, growth, dry run, missing files, corrupt sources."""

from __future__ import annotations

import sqlite3
from collections import defaultdict

import pytest
from django.core.management import call_command
from django.db import connection

from compaction.assembly import assemble_context
from conversations.models import (
    ContextItem,
    Conversation,
    Message,
    MessagePart,
    Summary,
    SummaryMessage,
    SummaryParent,
)
from core.api.errors import InvalidInput
from importers.models import ImportedFile, ImportedMessage, ImportedSummary
from importers.services import import_file
from integrity.checks import Scope
from integrity.report import scan
from largefiles.models import LargeFile
from tests.factories import UserFactory

TICKET = "NEEDLE-LC-7731"
SOURCE_COUNTS = {
    "conversations": 2,
    "messages": 720,
    "message_parts": 900,
    "summaries": 32,
    "summary_messages": 688,
    "summary_parents": 28,
    "context_items": 36,
    "large_files": 1,
}


def _import(user, path, **kwargs):
    return import_file(format="lossless-claw", path=path, owner=user, **kwargs)


def _ours(user) -> dict[str, int]:
    conversations = Conversation.objects.filter(owner=user)
    return {
        "conversations": conversations.count(),
        "messages": Message.objects.filter(conversation__in=conversations).count(),
        "message_parts": MessagePart.objects.filter(
            message__conversation__in=conversations
        ).count(),
        "summaries": Summary.objects.filter(conversation__in=conversations).count(),
        "summary_messages": SummaryMessage.objects.filter(conversation__in=conversations).count(),
        "summary_parents": SummaryParent.objects.filter(conversation__in=conversations).count(),
        "context_items": ContextItem.objects.filter(conversation__in=conversations).count(),
        "large_files": LargeFile.objects.filter(conversation__in=conversations).count(),
    }


def _source(path):
    db = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    db.row_factory = sqlite3.Row
    return db


@pytest.fixture
def imported(user, lc_fixture):
    report = _import(user, lc_fixture / "lcm.db", files_dir=lc_fixture / "lcm-files")
    return report


def test_the_fixture_imports_with_every_count_equal_to_the_source(user, imported):
    assert imported.notes["source_counts"] == SOURCE_COUNTS
    assert imported.totals() == SOURCE_COUNTS
    assert _ours(user) == SOURCE_COUNTS
    assert [c.problems for c in imported.conversations] == [[], []]
    sessions = sorted(Conversation.objects.filter(owner=user).values_list("session_id", flat=True))
    assert sessions == ["fixture-session-a", "fixture-session-b"]


def test_messages_keep_seq_order_parts_and_source_token_counts(user, imported, lc_fixture):
    source = _source(lc_fixture / "lcm.db")
    conversation = Conversation.objects.get(owner=user, session_id="fixture-session-a")
    ours = list(Message.objects.filter(conversation=conversation).order_by("seq"))
    theirs = source.execute(
        "SELECT message_id, seq, role, content, token_count FROM messages"
        " WHERE conversation_id = 1 ORDER BY seq"
    ).fetchall()
    assert [m.seq for m in ours] == list(range(1, 601))
    assert [m.external_id for m in ours] == [f"lossless-claw:{r['message_id']}" for r in theirs]
    assert [m.role for m in ours] == [r["role"] for r in theirs]
    for message, row in zip(ours, theirs, strict=True):
        if row["content"]:
            assert message.content == row["content"]
    meta = ImportedMessage.objects.get(message=ours[0])
    assert meta.source_token_count == theirs[0]["token_count"] == 19
    assert ours[0].token_count == 19  # our estimator: ceil(73 / 4)
    # A tool call keeps its input as JSON; its result gets the raw block's text.
    call = MessagePart.objects.get(message=ours[1], ordinal=1)
    assert (call.part_type, call.tool_call_id, call.tool_name) == (
        "tool",
        "toolu_fx0000001",
        "read_file",
    )
    assert call.tool_input == {"path": "migrations/0042.py"}
    result = MessagePart.objects.get(message=ours[2])
    assert result.tool_output.startswith("   0  def f_0_0(x): return x + 0")
    assert result.metadata["raw"]["tool_use_id"] == "toolu_fx0000001"
    assert ours[2].content.startswith("[tool read_file toolu_fx0000001]")


def _source_messages_under(source, summary_id) -> list[int]:
    leaves = defaultdict(list)
    for row in source.execute(
        "SELECT summary_id, message_id FROM summary_messages ORDER BY ordinal"
    ):
        leaves[row[0]].append(row[1])
    parents = defaultdict(list)
    for row in source.execute(
        "SELECT summary_id, parent_summary_id FROM summary_parents ORDER BY ordinal"
    ):
        parents[row[0]].append(row[1])

    def walk(sid):
        if sid in leaves:
            return list(leaves[sid])
        return [m for p in parents[sid] for m in walk(p)]

    return walk(summary_id)


def test_every_summary_expands_to_exactly_the_source_messages_of_its_lineage(
    user, imported, lc_fixture, api
):
    source = _source(lc_fixture / "lcm.db")
    by_external = dict(
        Message.objects.filter(conversation__owner=user).values_list("external_id", "id")
    )
    summaries = list(Summary.objects.filter(conversation__owner=user))
    assert len(summaries) == 32
    for summary in summaries:
        expected = [
            by_external[f"lossless-claw:{m}"] for m in _source_messages_under(source, summary.id)
        ]
        response = api.post(
            "/api/v1/expand/",
            {"summary_id": summary.id, "depth": 8, "include_messages": True, "token_cap": 10**7},
            format="json",
        )
        assert response.status_code == 200, response.json()
        got = [m["id"] for m in response.json()["messages"]]
        assert got == expected, summary.id
    row = source.execute(
        "SELECT kind, depth, earliest_at, latest_at, file_ids, model FROM summaries"
        " WHERE summary_id = 'sum_41126751f0f3cdc4'"
    ).fetchone()
    ours = Summary.objects.get(pk="sum_41126751f0f3cdc4")
    assert (ours.kind, ours.depth, ours.model) == (row["kind"], row["depth"], row["model"])
    assert ours.earliest_at.isoformat() == "2026-11-23T04:47:23+00:00"
    assert list(
        SummaryParent.objects.filter(summary=ours)
        .order_by("ordinal")
        .values_list("parent_summary_id", flat=True)
    ) == [
        r[0]
        for r in source.execute(
            "SELECT parent_summary_id FROM summary_parents WHERE summary_id ="
            " 'sum_41126751f0f3cdc4' ORDER BY ordinal"
        )
    ]
    assert ImportedSummary.objects.get(summary=ours).source_token_count == 331


def test_the_context_is_rebuilt_from_the_source_context_items_in_order(user, imported, lc_fixture):
    source = _source(lc_fixture / "lcm.db")
    external = dict(
        Message.objects.filter(conversation__owner=user).values_list("id", "external_id")
    )
    for source_id, session in ((1, "fixture-session-a"), (2, "fixture-session-b")):
        conversation = Conversation.objects.get(owner=user, session_id=session)
        ours = [
            ("message", f"lossless-claw:{external[i.message_id]}".removeprefix("lossless-claw:"))
            if i.message_id
            else ("summary", i.summary_id)
            for i in ContextItem.objects.filter(conversation=conversation).order_by("ordinal")
        ]
        theirs = [
            ("message", f"lossless-claw:{r['message_id']}")
            if r["item_type"] == "message"
            else ("summary", r["summary_id"])
            for r in source.execute(
                "SELECT * FROM context_items WHERE conversation_id = ? ORDER BY ordinal",
                [source_id],
            )
        ]
        assert ours == theirs
        assert conversation.last_context_ordinal == len(theirs)


def test_grep_finds_the_ticket_and_names_the_summary_that_covers_it_in_the_source(
    user, imported, lc_fixture, api
):
    source = _source(lc_fixture / "lcm.db")
    (message_id,) = source.execute(
        "SELECT message_id FROM messages WHERE content LIKE ?", [f"%{TICKET}%"]
    ).fetchone()
    in_context = {
        r[0]
        for r in source.execute("SELECT summary_id FROM context_items WHERE summary_id IS NOT NULL")
    }
    covering = next(s for s in in_context if message_id in _source_messages_under(source, s))
    response = api.post("/api/v1/grep/", {"query": TICKET, "mode": "regex"}, format="json")
    assert response.status_code == 200
    hits = [h for h in response.json()["results"] if h["type"] == "message"]
    assert len(hits) == 1
    assert hits[0]["covered_by"] == covering
    chinese = api.post("/api/v1/grep/", {"query": "中文", "mode": "regex"}, format="json")
    assert chinese.status_code == 200


def test_describe_assemble_and_the_explorer_work_on_imported_data(user, imported, client):
    conversation = Conversation.objects.get(owner=user, session_id="fixture-session-a")
    context = assemble_context(conversation=conversation)
    items = context.as_dict()["items"]
    assert len(items) == ContextItem.objects.filter(conversation=conversation).count() == 19
    assert items[0]["id"] == "sum_b657f3f5bccb630a"
    large = LargeFile.objects.get(conversation=conversation)
    assert large.id == "file_8318144bf9204bb7"
    assert large.byte_size == 63545
    assert large.storage_key == f"{conversation.pk}/file_8318144bf9204bb7.txt"
    assert ImportedFile.objects.get(large_file=large).missing is False
    client.force_login(user)
    for url in (
        f"/conversations/{conversation.pk}/",
        f"/conversations/{conversation.pk}/dag/",
        f"/conversations/{conversation.pk}/summaries/sum_41126751f0f3cdc4/",
    ):
        assert client.get(url).status_code == 200, url


def test_describe_returns_the_imported_file_and_summary(user, imported, api):
    file_response = api.get("/api/v1/describe/file_8318144bf9204bb7/")
    assert file_response.status_code == 200
    assert file_response.json()["byte_size"] == 63545
    summary_response = api.get("/api/v1/describe/sum_41126751f0f3cdc4/")
    assert summary_response.status_code == 200
    assert summary_response.json()["kind"] == "condensed"


def test_integrity_is_clean_after_the_import(user, imported):
    result = scan(Scope(None))
    assert {name: count for name, count in result.counts().items() if count} == {}


def test_a_second_import_adds_no_row(user, imported, lc_fixture):
    before = _ours(user)
    again = _import(user, lc_fixture / "lcm.db", files_dir=lc_fixture / "lcm-files")
    assert again.totals() == dict.fromkeys(SOURCE_COUNTS, 0)
    assert _ours(user) == before


def test_a_grown_source_adds_only_what_is_new(user, lc_copy, lc_fixture):
    _import(user, lc_copy, files_dir=lc_fixture / "lcm-files")
    db = sqlite3.connect(lc_copy)
    db.execute(
        "INSERT INTO messages (conversation_id, seq, role, content, token_count, created_at)"
        " VALUES (2, 121, 'user', 'A new question about GROWN-42.', 8, '2026-11-24 10:00:00')"
    )
    new_id = db.execute("SELECT MAX(message_id) FROM messages").fetchone()[0]
    db.execute(
        "INSERT INTO message_parts (part_id, message_id, session_id, part_type, ordinal,"
        " text_content) VALUES ('p-new', ?, 'fixture-session-b', 'text', 0, 'A new question"
        " about GROWN-42.')",
        [new_id],
    )
    last = db.execute("SELECT COUNT(*) FROM context_items WHERE conversation_id = 2").fetchone()[0]
    db.execute(
        "INSERT INTO context_items (conversation_id, ordinal, item_type, message_id)"
        " VALUES (2, (SELECT MAX(ordinal) + 1 FROM context_items WHERE conversation_id = 2),"
        " 'message', ?)",
        [new_id],
    )
    db.commit()
    db.close()
    report = _import(user, lc_copy, files_dir=lc_fixture / "lcm-files")
    totals = report.totals()
    assert totals["messages"] == 1
    assert totals["message_parts"] == 1
    assert totals["summaries"] == 0
    assert totals["large_files"] == 0
    conversation = Conversation.objects.get(owner=user, session_id="fixture-session-b")
    newest = Message.objects.filter(conversation=conversation).order_by("-seq").first()
    assert (newest.seq, newest.content) == (121, "A new question about GROWN-42.")
    assert ContextItem.objects.filter(conversation=conversation).count() == last + 1
    assert scan(Scope(conversation.pk)).total_problems == 0


def test_dry_run_counts_per_table_and_writes_nothing(user, lc_fixture, capsys):
    call_command(
        "lcm_import", "lossless-claw", str(lc_fixture / "lcm.db"), "--user", "owner", "--dry-run"
    )
    out = capsys.readouterr().out
    assert "would import" in out
    assert "  messages                 720         720" in out
    assert "  summary_parents           28          28" in out
    assert Conversation.objects.count() == 0
    assert Message.objects.count() == 0


def test_a_missing_file_is_reported_and_kept_marked_missing(user, lc_copy):
    report = _import(user, lc_copy)
    problems = [p for c in report.conversations for p in c.problems]
    assert [p["code"] for p in problems] == ["file_missing"]
    assert "file_8318144bf9204bb7" in problems[0]["message"]
    large = LargeFile.objects.get(pk="file_8318144bf9204bb7")
    assert ImportedFile.objects.get(large_file=large).missing is True
    assert large.byte_size == 63545
    assert "Text exploration summary" in large.exploration_summary
    assert report.totals() == SOURCE_COUNTS  # everything else imported
    counts = scan(Scope(None)).counts()
    assert counts["file_object_missing"] == 1
    assert sum(counts.values()) == 1


def test_a_summary_whose_parent_row_is_gone_is_reported_and_the_rest_imports(user, lc_copy):
    db = sqlite3.connect(lc_copy)
    db.execute("PRAGMA foreign_keys = OFF")
    (child, parent) = db.execute(
        "SELECT summary_id, parent_summary_id FROM summary_parents ORDER BY summary_id, ordinal"
        " LIMIT 1"
    ).fetchone()
    db.execute("DELETE FROM summary_messages WHERE summary_id = ?", [parent])
    db.execute("DELETE FROM summaries WHERE summary_id = ?", [parent])
    db.commit()
    db.close()
    report = _import(user, lc_copy)
    problems = [p for c in report.conversations for p in c.problems]
    unlinked = [p for p in problems if p["code"] == "unlinked_parent"]
    assert unlinked == [
        {
            "code": "unlinked_parent",
            "message": f"{child}: source summary {parent} does not exist (or could not be "
            "imported); edge not linked",
            "summary_id": child,
            "parent_summary_id": parent,
        }
    ]
    assert Summary.objects.filter(pk=child).exists()
    assert not Summary.objects.filter(pk=parent).exists()
    assert Summary.objects.count() == 31
    assert Message.objects.count() == 720
    assert SummaryParent.objects.count() == 27


def test_a_failing_conversation_leaves_nothing_of_it_and_the_other_imports(user, lc_copy):
    # Another user imported this database first: its summary ids are taken.
    other = UserFactory(username="first")
    _import(other, lc_copy)
    db = sqlite3.connect(lc_copy)  # conversation 2 of the source gets a fresh session id
    db.execute("UPDATE conversations SET session_id = 'renamed-b' WHERE conversation_id = 2")
    db.execute(
        "UPDATE summaries SET summary_id = 'sum_' || substr(summary_id, 5, 11) || 'f'"
        " WHERE conversation_id = 2 AND summary_id NOT IN (SELECT parent_summary_id FROM"
        " summary_parents)"
    )
    db.commit()
    db.close()
    report = _import(user, lc_copy)
    a, b = report.conversations
    assert a.failed.startswith("summary sum_")
    assert a.counts == dict.fromkeys(SOURCE_COUNTS, 0)
    assert not Conversation.objects.filter(owner=user, session_id="fixture-session-a").exists()
    # Nothing of the failed conversation remains: no messages of the user besides b's.
    assert b.session_id == "renamed-b"
    assert Message.objects.filter(conversation__owner=user).count() == (
        Message.objects.filter(
            conversation__owner=user, conversation__session_id="renamed-b"
        ).count()
    )


def test_a_file_that_is_not_a_lossless_claw_database_is_refused_clearly(user, tmp_path):
    path = tmp_path / "other.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE conversations (conversation_id INTEGER, session_id TEXT)")
    db.commit()
    db.close()
    with pytest.raises(InvalidInput) as error:
        _import(user, path)
    assert error.value.message == "not a lossless-claw database: table 'messages' is missing"
    assert Conversation.objects.count() == 0


def test_an_older_schema_without_optional_columns_imports(user, tmp_path):
    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.executescript(
        """
        CREATE TABLE conversations (conversation_id INTEGER PRIMARY KEY, session_id TEXT);
        CREATE TABLE messages (message_id INTEGER PRIMARY KEY, conversation_id INTEGER,
            seq INTEGER, role TEXT, content TEXT);
        CREATE TABLE message_parts (part_id TEXT, message_id INTEGER, part_type TEXT,
            ordinal INTEGER, text_content TEXT);
        CREATE TABLE summaries (summary_id TEXT, conversation_id INTEGER, kind TEXT,
            content TEXT);
        CREATE TABLE summary_messages (summary_id TEXT, message_id INTEGER, ordinal INTEGER);
        CREATE TABLE summary_parents (summary_id TEXT, parent_summary_id TEXT, ordinal INTEGER);
        CREATE TABLE context_items (conversation_id INTEGER, ordinal INTEGER, item_type TEXT,
            message_id INTEGER, summary_id TEXT);
        INSERT INTO conversations VALUES (1, 'old-session');
        INSERT INTO messages VALUES (1, 1, 1, 'user', 'hello'), (2, 1, 2, 'assistant', 'hi');
        INSERT INTO message_parts VALUES ('a', 1, 'text', 0, 'hello'), ('b', 2, 'text', 0, 'hi'),
            ('c', 2, 'future_kind', 1, 'kept raw');
        INSERT INTO summaries VALUES ('sum_00000000000000aa', 1, 'leaf', 'greetings');
        INSERT INTO summary_messages VALUES ('sum_00000000000000aa', 1, 0);
        INSERT INTO context_items VALUES (1, 0, 'summary', NULL, 'sum_00000000000000aa'),
            (1, 1, 'message', 2, NULL);
        """
    )
    db.commit()
    db.close()
    report = _import(user, path)
    assert report.totals()["messages"] == 2
    assert report.totals()["summaries"] == 1
    raw = MessagePart.objects.get(message__seq=2, ordinal=1)
    assert (raw.part_type, raw.text_content) == ("text", None)
    assert raw.metadata == {"source_part_type": "future_kind", "raw": {"text_content": "kept raw"}}
    assert scan(Scope(None)).total_problems == 0


def test_the_source_is_opened_read_only(user, lc_copy):
    before = sorted(p.name for p in lc_copy.parent.iterdir())
    stamp = lc_copy.stat().st_mtime_ns
    _import(user, lc_copy)
    assert sorted(p.name for p in lc_copy.parent.iterdir()) == before
    assert lc_copy.stat().st_mtime_ns == stamp


@pytest.mark.postgres
def test_imported_rows_refuse_updates_like_native_ones(user, imported):
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "UPDATE conversations_summary SET content = 'x' WHERE id = %s", ["sum_41126751f0f3cdc4"]
        )


def test_an_imported_conversation_takes_new_messages_and_compacts_like_a_native_one(
    user, imported, small_chunks
):
    from compaction.engine import compact_conversation
    from conversations.inputs import parse_message
    from conversations.services import messages_append

    conversation = Conversation.objects.get(owner=user, session_id="fixture-session-b")
    messages_append(
        conversation_id=conversation.pk,
        messages=[
            parse_message({"role": "user", "content": f"new native message {i}"}) for i in range(40)
        ],
    )
    assert Message.objects.filter(conversation=conversation).order_by("-seq").first().seq == 160
    result = compact_conversation(conversation_id=conversation.pk, mode="full")
    assert result.status == "compacted"
    assert Summary.objects.filter(conversation=conversation).count() > 5
    assert scan(Scope(conversation.pk)).total_problems == 0


def test_the_command_reports_progress_lines_and_missing_files_in_a_dry_run(user, lc_copy, capsys):
    call_command("lcm_import", "lossless-claw", str(lc_copy), "--user", "owner", "--dry-run")
    captured = capsys.readouterr()
    assert "Importing lossless-claw: 720/720 (100%)" in captured.err
    assert "! file_missing: file_8318144bf9204bb7: no bytes at" in captured.out
    assert Conversation.objects.count() == 0


def test_the_command_exits_with_status_1_when_a_conversation_could_not_be_imported(
    user, lc_copy, capsys
):
    _import(UserFactory(username="earlier"), lc_copy)  # its summary ids are now taken
    with pytest.raises(SystemExit) as exit_info:
        call_command("lcm_import", "lossless-claw", str(lc_copy), "--user", "owner")
    assert exit_info.value.code == 1
    assert "! summary_id_taken: summary sum_" in capsys.readouterr().out
    assert Conversation.objects.filter(owner=user).count() == 0


def test_a_conversation_that_went_on_here_is_not_mixed_with_a_grown_source(user, lc_copy):
    from conversations.inputs import parse_message
    from conversations.services import messages_append

    _import(user, lc_copy)
    conversation = Conversation.objects.get(owner=user, session_id="fixture-session-b")
    messages_append(
        conversation_id=conversation.pk,
        messages=[parse_message({"role": "user", "content": "added here"})],
    )
    db = sqlite3.connect(lc_copy)
    db.execute(
        "INSERT INTO messages (conversation_id, seq, role, content, token_count)"
        " VALUES (2, 121, 'user', 'added there', 3)"
    )
    db.commit()
    db.close()
    report = _import(user, lc_copy)
    a, b = report.conversations
    assert a.failed == ""
    assert b.problems[0]["code"] == "conversation_diverged"
    assert Message.objects.filter(conversation=conversation).count() == 121
    assert scan(Scope(conversation.pk)).total_problems == 0
