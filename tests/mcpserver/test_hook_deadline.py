"""Claude Code's hooks, run as `lcm_connect claude-code` writes them, answer within 2 s
whatever happens (the server down, a server that never answers, the database down), fail
open (exit 0; at most one line saying recall is unavailable), and what PreCompact had to
capture is spooled and delivered once the server or database is back."""

from __future__ import annotations

import json
import shlex
import socket
import subprocess
import time
from pathlib import Path

import pytest

from conversations.models import Message
from mcpserver.connect.claude_hooks import hook_groups
from mcpserver.connect.target import ServerTarget
from tests.importers.agent_sessions import SESSION, claude_code_2x, write_jsonl
from tests.mcpserver.conftest import ROOT, child_env
from tests.support.tokens import issue_token

pytestmark = pytest.mark.process(portable=True)

PROMISE_SECONDS = 2.0


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def configured(target: ServerTarget, event: str) -> list[str]:
    """The command Claude Code runs for `event`, as lcm_connect writes it."""
    group = hook_groups(target, "lcm")[event]
    return shlex.split(group["hooks"][0]["command"])


def run_hook(command: list[str], hook_input: dict, env: dict) -> tuple[float, str, str]:
    started = time.monotonic()
    done = subprocess.run(
        command, input=json.dumps(hook_input), capture_output=True, text=True, env=env,
        cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return time.monotonic() - started, done.stdout, done.stderr


def start_input() -> dict:
    return {"session_id": SESSION, "hook_event_name": "SessionStart", "source": "startup"}


def compact_input(transcript: Path) -> dict:
    return {"session_id": SESSION, "transcript_path": str(transcript),
            "hook_event_name": "PreCompact", "trigger": "auto"}  # fmt: skip


def _unavailable_line(stdout: str) -> str:
    context = json.loads(stdout)["hookSpecificOutput"]["additionalContext"]
    assert "unavailable right now" in context and "\n" not in context
    return context


def test_hooks_answer_within_two_seconds_with_the_server_down_or_silent(tmp_path):
    env = {**child_env(), "LCM_HOOK_SPOOL": str(tmp_path / "spool")}
    transcript = write_jsonl(tmp_path / f"{SESSION}.jsonl", claude_code_2x())
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        urls = [f"http://127.0.0.1:{_closed_port()}", f"http://127.0.0.1:{silent.getsockname()[1]}"]
        for url in urls:
            target = ServerTarget("http", base_url=url, token="lcm_whatever")
            took, out, _ = run_hook(configured(target, "SessionStart"), start_input(), env)
            assert took < PROMISE_SECONDS, (url, took)
            _unavailable_line(out)

            for _ in range(2):  # the same transcript twice: spooled once, the newest
                took, out, err = run_hook(configured(target, "PreCompact"),
                                          compact_input(transcript), env)  # fmt: skip
                assert took < PROMISE_SECONDS, (url, took)
                assert out == "" and "transcript" in err
    spooled = [json.loads(p.read_text()) for p in (tmp_path / "spool").glob("*.json")]
    assert sorted(entry["owner"] for entry in spooled) == sorted(f"server:{u}" for u in urls)
    assert {entry["hook_input"]["transcript_path"] for entry in spooled} == {str(transcript)}
    assert "lcm_whatever" not in json.dumps(spooled)  # no token in the spool


@pytest.mark.django_db(transaction=True)
def test_hooks_answer_within_two_seconds_with_the_database_down_and_catch_up_after(tmp_path, user):
    spool = tmp_path / "spool"
    down = {**child_env(), "LCM_HOOK_SPOOL": str(spool),
            "LCM_DATABASE_URL": f"postgres://postgres@127.0.0.1:{_closed_port()}/gone"}  # fmt: skip
    target = ServerTarget("stdio", username=user.username)
    transcript = write_jsonl(tmp_path / f"{SESSION}.jsonl", claude_code_2x())

    took, out, _ = run_hook(configured(target, "SessionStart"), start_input(), down)
    assert took < PROMISE_SECONDS, took
    _unavailable_line(out)
    took, out, _ = run_hook(configured(target, "PreCompact"), compact_input(transcript), down)
    assert took < PROMISE_SECONDS, took
    assert out == "" and Message.objects.count() == 0
    assert len(list(spool.glob("*.json"))) == 1

    # The database is back: the hook's answer is refreshed in the background (Django may
    # start slower than the deadline), then hooks answer in full and deliver the spool.
    up = {**child_env(), "LCM_HOOK_SPOOL": str(spool)}
    deadline = time.monotonic() + 90
    context = ""
    while "lcm_grep" not in context and time.monotonic() < deadline:
        took, out, _ = run_hook(configured(target, "SessionStart"), start_input(), up)
        assert took < PROMISE_SECONDS, took
        context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
        time.sleep(3)  # each hook starts a Django child: not too many at once
    assert "lcm_grep" in context and "unavailable" not in context
    while list(spool.glob("*.json")) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert list(spool.glob("*.json")) == []
    assert Message.objects.filter(conversation__owner=user).count() > 0


@pytest.mark.django_db(transaction=True)
def test_a_remote_pre_compact_is_delivered_from_the_spool_once_the_server_answers(
    tmp_path, user, live_server, settings
):
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "sync": True}  # the import job runs at once
    env = {**child_env(), "LCM_HOOK_SPOOL": str(tmp_path / "spool")}
    key = issue_token(user)
    transcript = write_jsonl(tmp_path / f"{SESSION}.jsonl", claude_code_2x())
    refused = ServerTarget("http", base_url=live_server.url, token="lcm_revoked")
    _, _, err = run_hook(configured(refused, "PreCompact"), compact_input(transcript), env)
    assert "kept in the spool" in err or "background" in err
    assert Message.objects.count() == 0

    up = ServerTarget("http", base_url=live_server.url, token=key)
    _, out, _ = run_hook(configured(up, "SessionStart"), start_input(), env)
    assert "lcm_grep" in json.loads(out)["hookSpecificOutput"]["additionalContext"]
    deadline = time.monotonic() + 30
    while list((tmp_path / "spool").glob("*.json")) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert list((tmp_path / "spool").glob("*.json")) == []
    assert Message.objects.filter(conversation__owner=user).count() > 0
