"""The repair after a Claude Code compaction, through `manage.py lcm_hook`: PostCompact draws
and stores it, SessionStart with source `compact` hands it back in `additionalContext`, with
the agent compaction's summary id; a new session in the same project gets the hand-off."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command

from conversations.models import Summary
from importers.models import AgentCompactionRepair
from mcpserver.hooks import client
from mcpserver.tools import mcp_tools
from tests.importers.agent_sessions import SESSION, assistant, cc, write_jsonl


def hook(monkeypatch, event: str, hook_input: dict, *args) -> tuple[str, str]:
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(hook_input)))
    out, err = io.StringIO(), io.StringIO()
    call_command("lcm_hook", event, *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def use(call_id: str, name: str, given: dict) -> dict:
    return {"type": "tool_use", "id": call_id, "name": name, "input": given}


def result(call_id: str, text: str, error: bool = False) -> list[dict]:
    return [{"type": "tool_result", "tool_use_id": call_id, "content": text, "is_error": error}]


def worked_session(summary: str, when: datetime | None = None) -> list[dict]:
    """A Claude Code 2.x session that edits, fails a test, fixes it, then compacts with
    `summary` as its own summary."""
    when = when or datetime(2026, 5, 1, 10, 0, tzinfo=UTC)

    def at(n: int) -> str:
        return (when + timedelta(seconds=n)).strftime("%Y-%m-%dT%H:%M:%SZ")

    edit = {
        "file_path": "/work/app/src/cache.py",
        "old_string": "TTL = 60",
        "new_string": "TTL = ttl_seconds()",
    }
    return [
        cc("u01", None, "user", "Make the cache entries expire after 300 seconds.", when=at(1)),
        assistant(
            "r02",
            "u01",
            [use("t1", "Bash", {"command": "pytest tests/test_cache.py"})],
            1,
            timestamp=at(2),
        ),  # fmt: skip
        cc(
            "u03",
            "r02",
            "user",
            result(
                "t1",
                "FAILED tests/test_cache.py::test_expiry - AssertionError: entry still present",
                True,
            ),
            when=at(3),
        ),  # fmt: skip
        assistant(
            "r04",
            "u03",
            [
                {"type": "text", "text": "The TTL is hard-coded, so I'll read it from settings."},
                use("t2", "Edit", edit),
            ],
            2,
            timestamp=at(4),
        ),
        cc("u05", "r04", "user", result("t2", "The file was updated."), when=at(5)),
        assistant(
            "r06",
            "u05",
            [use("t3", "Bash", {"command": "pytest tests/test_cache.py"})],
            3,
            timestamp=at(6),
        ),  # fmt: skip
        cc("u07", "r06", "user", result("t3", "3 passed"), when=at(7)),
        assistant(
            "r08",
            "u07",
            [{"type": "text", "text": "The cache now expires entries."}],
            4,
            timestamp=at(8),
        ),  # fmt: skip
        cc(
            "s09",
            None,
            "system",
            subtype="compact_boundary",
            content="Conversation compacted",
            logicalParentUuid="r08",
            compactMetadata={"trigger": "manual", "preTokens": 9000},
            when=at(9),
        ),
        cc("u10", "s09", "user", summary, isCompactSummary=True, when=at(10)),
    ]


THIN = "Summary: the user wanted the cache fixed; it is done."


def compact_input(path, source="compact") -> dict:
    return {
        "session_id": SESSION,
        "transcript_path": str(path),
        "cwd": "/work/app",
        "hook_event_name": "SessionStart",
        "source": source,
    }


def context_of(out: str) -> str:
    return json.loads(out)["hookSpecificOutput"]["additionalContext"]


@pytest.mark.django_db
def test_after_the_agents_compaction_the_next_prompt_hands_back_what_its_summary_dropped(
    monkeypatch, tmp_path, user
):
    """In Claude Code 2.1's order: PreCompact and SessionStart `compact` before the summary
    is known, PostCompact with it, the transcript written after them, then the next prompt."""
    records = worked_session(THIN)
    before = [r for r in records if r["uuid"] not in ("s09", "u10")]
    transcript = write_jsonl(tmp_path / f"{SESSION}.jsonl", before)
    hook(monkeypatch, "pre-compact", {**compact_input(transcript), "hook_event_name": "PreCompact",
         "trigger": "manual"}, "--user", user.username)  # fmt: skip
    out, _ = hook(monkeypatch, "session-start", compact_input(transcript), "--user", user.username)
    assert "left out" not in context_of(out)  # the summary is not known yet

    post = {**compact_input(transcript), "hook_event_name": "PostCompact", "trigger": "manual",
            "compact_summary": f"<summary>{THIN}</summary>"}  # fmt: skip
    spool = tmp_path / "spool"
    out, err = hook(monkeypatch, "post-compact", post, "--user", user.username, "--spool", spool)
    assert out == "" and "tokens to hand back" in err
    summary = Summary.objects.get(model__endswith="(agent compaction)")
    assert summary.content == THIN
    stored = AgentCompactionRepair.objects.get(summary=summary)
    assert stored.deliveries == [] and 0 < stored.tokens <= 1_500
    # The note the hook client hands back with the next prompt without starting Django: once.
    owner = client.owner_key(user=user.username, server=None)
    assert client.repair_note_take(owner, post["session_id"], spool) == stored.text
    assert client.repair_note_take(owner, post["session_id"], spool) == ""

    write_jsonl(transcript, records)  # the agent writes its compaction afterwards
    prompt = {**compact_input(transcript), "hook_event_name": "UserPromptSubmit",
              "prompt": "Where did we leave it?"}  # fmt: skip
    out, err = hook(monkeypatch, "user-prompt-submit", prompt, "--user", user.username)
    output = json.loads(out)["hookSpecificOutput"]
    assert output["hookEventName"] == "UserPromptSubmit" and err == ""
    context = output["additionalContext"]
    assert context == stored.text
    assert f"summary_id={summary.pk}" in context
    assert "cache.py" in context and "300" in context
    assert "AssertionError" in context and "fixed by editing cache.py" in context
    asked = next(line for line in context.splitlines() if "expire after 300 seconds" in line)
    assert asked.startswith(("- The user asked: ", "- The user said: ")) and "(msg:1)" in asked
    stored.refresh_from_db()
    assert [d["event"] for d in stored.deliveries] == ["UserPromptSubmit"]
    assert stored.measured["after"]["score"] > stored.measured["before"]["score"]

    # handed back once; the transcript's own record of the compaction is the same one
    out, _ = hook(monkeypatch, "user-prompt-submit", prompt, "--user", user.username)
    assert out == ""
    call_command("lcm_import", "claude-code", str(transcript), "--user", user.username,
                 stdout=io.StringIO())  # fmt: skip
    assert Summary.objects.filter(model__endswith="(agent compaction)").count() == 1
    assert AgentCompactionRepair.objects.count() == 1


@pytest.mark.django_db
def test_a_compaction_found_in_the_transcript_is_handed_back_by_session_start(
    monkeypatch, tmp_path, user
):
    """An agent that writes its compaction before SessionStart `compact` (or a resumed
    session) gets the repair there."""
    transcript = write_jsonl(tmp_path / f"{SESSION}.jsonl", worked_session(THIN))
    out, err = hook(
        monkeypatch, "session-start", compact_input(transcript), "--user", user.username
    )
    summary = Summary.objects.get(model__endswith="(agent compaction)")
    stored = AgentCompactionRepair.objects.get(summary=summary)
    context = context_of(out)
    assert err == "" and "lcm_grep" in context  # the note still comes first
    assert context.endswith(stored.text)
    assert [d["event"] for d in stored.deliveries] == ["SessionStart:compact"]


@pytest.mark.django_db
def test_no_repair_without_a_compaction_or_when_turned_off(monkeypatch, tmp_path, user, settings):
    records = [r for r in worked_session(THIN) if r["uuid"] not in ("s09", "u10")]
    transcript = write_jsonl(tmp_path / f"{SESSION}.jsonl", records)
    out, _ = hook(monkeypatch, "session-start", compact_input(transcript, "resume"),
                  "--user", user.username)  # fmt: skip
    assert "left out" not in context_of(out)

    transcript = write_jsonl(tmp_path / f"{SESSION}.jsonl", worked_session(THIN))
    settings.LCM_REPAIR_ENABLED = False
    out, _ = hook(monkeypatch, "session-start", compact_input(transcript), "--user", user.username)
    assert "left out" not in context_of(out)
    assert not AgentCompactionRepair.objects.exists()
    out, _ = hook(monkeypatch, "user-prompt-submit", compact_input(transcript),
                  "--user", user.username)  # fmt: skip
    assert out == ""


@pytest.mark.django_db
def test_a_new_session_in_the_project_gets_the_hand_off_of_the_recent_one(
    monkeypatch, tmp_path, user, other_user, settings
):
    recent = datetime.now(UTC) - timedelta(minutes=30)
    transcript = write_jsonl(tmp_path / f"{SESSION}.jsonl", worked_session(THIN, recent))
    call_command("lcm_import", "claude-code", str(transcript), "--user", user.username,
                 stdout=io.StringIO())  # fmt: skip
    start = {**compact_input(tmp_path / "new.jsonl", "startup"), "session_id": "another-one"}
    out, _ = hook(monkeypatch, "session-start", start, "--user", user.username)
    context = context_of(out)
    assert "Hand-off from the claude-code session" in context and "/work/app" in context
    assert "cache.py" in context and "300" in context

    elsewhere = {**start, "cwd": "/work/other"}
    out, _ = hook(monkeypatch, "session-start", elsewhere, "--user", user.username)
    assert "Hand-off" not in context_of(out)
    settings.LCM_HANDOFF_RECENT_HOURS = 0
    out, _ = hook(monkeypatch, "session-start", start, "--user", user.username)
    assert "Hand-off" not in context_of(out)

    # on demand, from any agent, through the MCP tool: the same hand-off
    tool = mcp_tools()["lcm_handoff"]
    given = json.loads(tool.run(user=user, arguments={"project": "/work/app"}).text)
    assert given["session_id"] == SESSION and given["agent"] == "claude-code"
    assert given["handoff"] == context.split("\n\n", 1)[1] and given["tokens"] <= 1_500
    by_id = json.loads(tool.run(user=user, arguments={"session": SESSION}).text)
    assert by_id["handoff"] == given["handoff"]
    for arguments in ({"project": "/work/app"}, {"session": SESSION}, {"agent": "codex"}):
        refused = tool.run(user=other_user if "agent" not in arguments else user,
                           arguments=arguments)  # fmt: skip
        assert refused.is_error and json.loads(refused.text)["code"] == "not_found"
