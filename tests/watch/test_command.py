"""`manage.py lcm_watch --once` (a backfill with progress) and `--once --file` (the
interface Claude Code's PreCompact hook calls), in-process."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from conversations.models import Message
from importers.models import WatchedFile
from tests.importers.agent_sessions import SESSION, write_jsonl

from .test_watcher import linear_session

pytestmark = pytest.mark.django_db


def run(*args) -> str:
    out = io.StringIO()
    call_command("lcm_watch", *args, stdout=out)
    return out.getvalue()


def test_once_backfills_every_followed_store_with_progress(tmp_path, user, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "cc"))  # the agent's own variable
    write_jsonl(tmp_path / "cc" / "projects" / "-w" / f"{SESSION}.jsonl", linear_session(2))
    output = run("--user", user.username, "--once")
    assert f"{SESSION}.jsonl: +8 messages" in output
    assert "1 session(s) imported, 8 new message(s)" in output
    assert "0 new message(s)" in run("--user", user.username, "--once", "--no-codex")


def test_once_file_catches_up_one_session_wherever_it_is(tmp_path, user, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    other = write_jsonl(tmp_path / "elsewhere" / "-x" / "other.jsonl", linear_session(1))
    path = write_jsonl(tmp_path / "elsewhere" / "-w" / f"{SESSION}.jsonl", linear_session(3))
    run("--user", user.username, "--once", "--file", str(path), "--quiet")
    assert Message.objects.count() == 12
    assert [row.path for row in WatchedFile.objects.all()] == [str(path)]  # not `other`
    assert other.exists()
    with pytest.raises(CommandError, match="--file goes with --once"):
        run("--user", user.username, "--file", str(path))
    with pytest.raises(CommandError, match="no user named"):
        run("--user", "nobody", "--once")
