"""Claude Code 2.x sessions import as ONE conversation (plus real branches and linked
sub-agents); the agent's own compaction is a summary in the DAG over what it replaced."""

from __future__ import annotations

import pytest

from conversations.models import Conversation, ConversationOrigin, Message, MessagePart, Summary
from importers.models import ImportedConversation, ImportedSummary
from importers.services import import_file
from integrity.checks import Scope
from integrity.report import scan
from retrieval.selectors import expand_for_user
from tests.importers.agent_sessions import SESSION, claude_code_2x, subagent, write_jsonl

BRANCH = f"{SESSION}:branch:u11"


@pytest.fixture
def session_file(tmp_path):
    path = write_jsonl(tmp_path / f"{SESSION}.jsonl", claude_code_2x())
    write_jsonl(tmp_path / SESSION / "subagents" / "agent-abc123.jsonl", subagent("abc123"))
    # The older layout: the sub-agent file beside the session, naming it.
    write_jsonl(tmp_path / "agent-def456.jsonl", subagent("def456"))
    write_jsonl(tmp_path / "agent-other.jsonl", [dict(subagent("o")[0], sessionId="another")])
    return path


@pytest.fixture
def report(user, session_file):
    return import_file(format="claude-code", path=session_file, owner=user)


def _external_ids(session_id):
    return list(
        Message.objects.filter(conversation__session_id=session_id)
        .order_by("seq")
        .values_list("external_id", flat=True)
    )


def test_one_main_conversation_holds_every_record_of_the_main_line(user, report):
    sessions = {c.session_id for c in report.conversations}
    assert sessions == {
        SESSION,
        BRANCH,
        f"{SESSION}:subagent:abc123",
        f"{SESSION}:subagent:def456",
    }
    main = [e.removeprefix("claude-code:") for e in _external_ids(SESSION)]
    # Attachments and progress records are not messages but do not cut the chain; the
    # parallel tool calls (r05, r06) and their results (u07 under r06, u09 under r05) stay.
    assert main == [
        "u02", "r04", "r05", "r06", "u07", "u09", "r10", "u13", "r14", "u15",
        "s16", "u17", "u18", "r19",
    ]  # fmt: skip
    assert Conversation.objects.get(owner=user, session_id=SESSION).title == "Cleaning up files"
    assert report.notes["skipped_records"] == {
        "permission-mode": 1,
        "attachment": 2,
        "progress": 1,
        "last-prompt": 1,
        "ai-title": 1,
    }


def test_an_edited_prompt_is_the_only_branch_and_says_why(user, report):
    branch = [e.removeprefix("claude-code:") for e in _external_ids(BRANCH)]
    assert branch == ["u02", "r04", "r05", "r06", "u07", "u09", "r10", "u11", "r12"]
    row = ImportedConversation.objects.get(conversation__session_id=BRANCH)
    assert row.metadata["line"] == "branch"
    assert row.metadata["parent_session"] == SESSION
    assert "second user prompt under r10" in row.metadata["branch_reason"]


def test_the_records_of_one_response_are_marked_so_usage_counts_once(user, report):
    def source(uuid):
        part = MessagePart.objects.get(
            message__conversation__session_id=SESSION,
            message__external_id=f"claude-code:{uuid}",
            ordinal=0,
        )
        return part.metadata["source"]

    assert source("r04")["usage"] == {"input_tokens": 10, "output_tokens": 5}
    for uuid in ("r05", "r06"):
        assert source(uuid)["same_response_as"] == "claude-code:r04"
        assert source(uuid)["usage_repeated"] is True
        assert "usage" not in source(uuid)
    assert "same_response_as" not in source("r10")


def test_session_facts_are_kept_and_filterable(user, report, api):
    row = ConversationOrigin.objects.get(conversation__session_id=SESSION)
    assert (row.agent, row.agent_version, row.cwd, row.git_branch, row.model) == (
        "claude-code",
        "2.1.114",
        "/work/app",
        "feature/x",
        "claude-opus-4-5",
    )
    assert row.started_at.isoformat() == "2026-05-01T10:00:01+00:00"
    body = api.get("/api/v1/imports/sessions/", {"agent": "claude-code", "cwd": "/work/app"})
    assert body.status_code == 200, body.json()
    found = {r["session_id"]: r for r in body.json()["results"]}
    assert set(found) == {c.session_id for c in report.conversations}
    assert found[SESSION]["git_branch"] == "feature/x"
    assert api.get("/api/v1/imports/sessions/", {"agent": "codex"}).json()["results"] == []
    assert api.get("/api/v1/imports/sessions/", {"model": "opus"}).json()["results"]


def test_sub_agents_of_both_layouts_are_linked_to_their_session_and_tool_call(user, report):
    new = ImportedConversation.objects.get(conversation__session_id=f"{SESSION}:subagent:abc123")
    assert new.metadata["parent_session"] == SESSION
    assert new.metadata["parent_tool_call_id"] == "toolu_3"
    assert new.metadata["agent_type"] == "general-purpose"
    assert new.metadata["line"] == "subagent"
    old = ImportedConversation.objects.get(conversation__session_id=f"{SESSION}:subagent:def456")
    assert old.metadata["source_file"] == "agent-def456.jsonl"
    assert _external_ids(f"{SESSION}:subagent:abc123") == ["claude-code:x01", "claude-code:x02"]
    assert not Conversation.objects.filter(session_id__endswith=":subagent:o").exists()


def test_the_agents_compaction_is_a_summary_over_the_messages_before_it(user, report):
    summary = Summary.objects.get(conversation__session_id=SESSION)
    assert summary.model == "claude-code (agent compaction)"
    assert summary.kind == "leaf"
    assert summary.content == "Summary: the user counted files and deleted the logs."
    source = ImportedSummary.objects.get(summary=summary).source
    assert source["kind"] == "agent_compaction"
    assert source["author"] == "claude-code"
    assert source["compact_metadata"] == {"trigger": "auto", "preTokens": 150000}
    expanded = expand_for_user(user=user, summary_id=summary.pk, include_messages=True)
    assert [m["seq"] for m in expanded.messages] == list(range(1, 11))  # u02 .. u15
    assert report.totals()["summaries"] == 1


def test_importing_again_adds_nothing_and_integrity_is_clean(user, report, session_file):
    before = Message.objects.count(), MessagePart.objects.count(), Summary.objects.count()
    again = import_file(format="claude-code", path=session_file, owner=user)
    assert again.totals()["messages"] == 0
    after = Message.objects.count(), MessagePart.objects.count(), Summary.objects.count()
    assert after == before
    assert scan(Scope(None)).total_problems == 0


def test_a_half_written_last_line_is_reported_then_imported_once_whole(user, tmp_path):
    records = claude_code_2x()
    path = write_jsonl(tmp_path / "s.jsonl", records[:8], tail='{"parentUuid": "u07", "ty')
    first = import_file(format="claude-code", path=path, owner=user)
    assert [e["line"] for e in first.errors] == [9]
    write_jsonl(path, records)
    second = import_file(format="claude-code", path=path, owner=user)
    assert second.errors == []
    main = _external_ids(SESSION)
    assert len(main) == len(set(main)) == 14
    assert first.totals()["messages"] + second.totals()["messages"] == 14 + 9  # main, branch


def test_a_parent_loop_or_a_missing_parent_loses_no_record():
    from importers.transcripts.claude_code import parse
    from importers.transcripts.common import Line
    from tests.importers.agent_sessions import cc

    records = [
        cc("u01", None, "user", "First."),
        cc("u02", "u03", "user", "Loop a."),
        cc("u03", "u02", "user", "Loop b."),
        cc("u04", "gone", "user", "Parent not in the file."),
    ]
    parsed = parse(
        [Line(n, r) for n, r in enumerate(records, 1)], session_id=None, default_session="x"
    )
    [main] = parsed.conversations
    assert [m["external_id"] for _, m in main.messages] == [
        "claude-code:u01",
        "claude-code:u02",
        "claude-code:u03",
        "claude-code:u04",
    ]
