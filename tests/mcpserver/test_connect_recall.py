"""Recall across agents, end to end: a Codex session is captured (imported) for a user;
`lcm_connect claude-code` prints the MCP entry a Claude Code user of that account gets;
the official MCP SDK client starts exactly that server (command, args, env) and finds the
fact from the Codex session, with where it comes from, and nothing of another user's."""

from __future__ import annotations

import io
import json
import re

import anyio
import pytest
from django.core.management import call_command
from mcp import ClientSession, StdioServerParameters, stdio_client

from importers.services import import_file
from tests.factories import UserFactory
from tests.importers.agent_sessions import codex_rollout, write_jsonl
from tests.mcpserver.conftest import child_env

pytestmark = pytest.mark.process(portable=True)

FACT = "the flaky migration test needed SQLITE_TMPDIR set to a writable directory"


def rollout(tmp_path, *, session: str, cwd: str, text: str):
    records = codex_rollout()
    records[0]["payload"].update(id=session, cwd=cwd)
    records[2]["payload"]["cwd"] = cwd
    records[3]["payload"]["content"][0]["text"] = text
    return write_jsonl(tmp_path / f"rollout-2026-05-02T09-00-00-{session}.jsonl", records)


def printed_claude_code_entry(username: str) -> dict:
    """The `mcpServers` entry lcm_connect prints for Claude Code (JSON before the hooks)."""
    out = io.StringIO()
    call_command("lcm_connect", "claude-code", "--user", username, "--no-hooks", stdout=out)
    text = re.sub(r"^#.*$", "", out.getvalue(), flags=re.MULTILINE)
    return json.loads(text)["mcpServers"]["lcm"]


async def _greps(entry: dict, *calls: dict) -> list[dict]:
    """lcm_grep once per `calls`, in one session of the server the entry starts."""
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env=entry["env"])
    answers = []
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        for arguments in calls:
            result = await session.call_tool("lcm_grep", arguments)
            assert result.is_error is False, result.content[0].text
            answers.append(json.loads(result.content[0].text))
    return answers


def test_a_claude_code_user_finds_what_their_codex_session_said(
    transactional_db, tmp_path, monkeypatch
):
    owner, other = UserFactory(username="dev"), UserFactory(username="someone")
    path = rollout(tmp_path / "mine", session="019b0000-aaaa-7000-8000-00000000000a",
                   cwd="/home/dev/api", text=f"Note: {FACT}.")  # fmt: skip
    import_file(format="codex", path=path, owner=owner)
    theirs = rollout(tmp_path / "theirs", session="019b0000-aaaa-7000-8000-00000000000b",
                     cwd="/home/someone/api", text=f"Their note: {FACT}.")  # fmt: skip
    import_file(format="codex", path=theirs, owner=other)

    # lcm_connect passes on the settings that point at this (test) database.
    env = child_env()
    for name in ("LCM_DATABASE_URL", "LCM_DATA_DIR"):
        monkeypatch.setenv(name, env[name])
    entry = printed_claude_code_entry("dev")
    assert entry["type"] == "stdio" and entry["env"]["LCM_DATABASE_URL"] == env["LCM_DATABASE_URL"]
    # What the agent would add to the server's environment: the rest of its own.
    entry["env"] = {**env, **entry["env"]}

    found, elsewhere = anyio.run(
        _greps,
        entry,
        {"query": "SQLITE_TMPDIR writable", "agent": "codex"},
        # The project filter, as the agent would ask about "the other repo".
        {"query": "SQLITE_TMPDIR", "project": "/home/dev/web"},
    )
    hits = found["results"]
    assert len(hits) == 1
    assert "SQLITE_TMPDIR" in hits[0]["snippet"]
    origin = hits[0]["origin"]
    assert origin["agent"] == "codex" and origin["project"] == "/home/dev/api"
    assert origin["session_id"] == "019b0000-aaaa-7000-8000-00000000000a"
    assert origin["git_branch"] == "main"
    assert elsewhere["results"] == []
