"""The agent formats through every entry point: `lcm_import FORMAT PATH`, the import API,
and `lcm_eval capture` (its table on files the test writes)."""

from __future__ import annotations

import io
import json

from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command

from conversations.models import Message
from tests.importers.agent_sessions import (
    SESSION,
    claude_code_2x,
    codex_rollout,
    gemini_chat,
    opencode_session,
    subagent,
    write_jsonl,
    write_opencode_db,
)

CODEX_SESSION = "019b0000-aaaa-7000-8000-000000000001"


def test_lcm_import_takes_the_agent_formats(user, tmp_path):
    path = write_jsonl(tmp_path / "rollout-a.jsonl", codex_rollout())
    out = io.StringIO()
    call_command("lcm_import", "codex", str(path), "--user", user.username, "--json", stdout=out)
    data = json.loads(out.getvalue())
    assert data["format"] == "codex"
    assert data["totals"]["messages"] == 14
    assert data["totals"]["summaries"] == 1


def test_the_import_api_takes_an_uploaded_opencode_database(
    api, user, sync_jobs, tmp_path, django_capture_on_commit_callbacks
):
    path = write_opencode_db(tmp_path / "opencode.db", [opencode_session()])
    upload = SimpleUploadedFile("opencode.db", path.read_bytes())
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(
            "/api/v1/imports/", {"file": upload, "format": "opencode"}, format="multipart"
        )
    assert response.status_code == 202, response.json()
    detail = api.get(f"/api/v1/imports/{response.json()['id']}/").json()
    assert detail["state"] == "succeeded", detail
    assert detail["result"]["totals"]["messages"] == 6
    sessions = api.get("/api/v1/imports/sessions/", {"agent": "opencode"}).json()["results"]
    assert [s["cwd"] for s in sessions] == ["/work/site"]


def test_lcm_eval_capture_prints_one_row_per_session_file(db, tmp_path):
    folder = tmp_path / "sessions"
    write_jsonl(folder / "claude" / f"{SESSION}.jsonl", claude_code_2x())
    write_jsonl(folder / "claude" / SESSION / "subagents" / "agent-abc123.jsonl", subagent("a"))
    write_jsonl(folder / "codex" / "rollout-a.jsonl", codex_rollout())
    (folder / "gemini").mkdir()
    (folder / "gemini" / "session-1.json").write_text(json.dumps(gemini_chat()))
    write_opencode_db(folder / "opencode.db", [opencode_session()])
    out = io.StringIO()
    call_command("lcm_eval", "capture", str(folder), "--json", str(tmp_path / "c.json"), stdout=out)
    rows = {r["file"]: r for r in json.loads((tmp_path / "c.json").read_text())}
    assert set(rows) == {f"{SESSION}.jsonl", "rollout-a.jsonl", "session-1.json", "opencode.db"}
    claude = rows[f"{SESSION}.jsonl"]
    # every user/assistant record but the 2 of the abandoned try (its branch holds them)
    assert (claude["main_line"], claude["said"]) == (13, 15)
    assert claude["conversations"][0] == "main"
    assert claude["conversations"][1].startswith("branch: a second user prompt")
    assert "subagent" in claude["conversations"]
    assert (claude["tool_paired"], claude["tool_calls"]) == (3, 3)
    assert claude["compactions_linked"] == 1
    codex = rows["rollout-a.jsonl"]
    assert (codex["tool_paired"], codex["tool_calls"]) == (3, 4)  # the web search has no output
    assert (codex["main_line"], codex["said"]) == (12, 12)
    assert rows["opencode.db"]["compactions_linked"] == 1
    assert all(r["second_import_added"] == 0 and r["refused"] == 0 for r in rows.values())
    assert "| `rollout-a.jsonl` | codex |" in out.getvalue()
    assert Message.objects.filter(conversation__session_id=CODEX_SESSION).count() == 14
