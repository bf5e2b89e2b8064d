"""`lcm_connect claude-code --proxy`: Claude Code's model calls through /anthropic, as two
env entries of its settings, merged (never clobbered) and removed again."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tokens.services import token_authenticate

pytestmark = pytest.mark.django_db


@pytest.fixture
def home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    return home


def connect(*args) -> str:
    out = io.StringIO()
    call_command("lcm_connect", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_proxy_merges_the_env_entries_and_remove_takes_only_them_out(home, user):
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    theirs = {
        "model": "opus",
        "env": {"DISABLE_TELEMETRY": "1", "ANTHROPIC_CUSTOM_HEADERS": "X-Team: blue"},
    }
    settings.write_text(json.dumps(theirs, indent=4))
    url = "http://127.0.0.1:8000"

    printed = connect("claude-code", "--proxy", "--url", url, "--user", user.username)
    assert json.loads(settings.read_text()) == theirs  # printed only
    assert "ANTHROPIC_BASE_URL" in printed

    connect("claude-code", "--proxy", "--url", url, "--user", user.username, "--write")
    env = json.loads(settings.read_text())["env"]
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:8000/anthropic"
    assert env["DISABLE_TELEMETRY"] == "1"
    first, second = env["ANTHROPIC_CUSTOM_HEADERS"].split("\n")
    assert first == "X-Team: blue"
    token = second.removeprefix("X-LCM-Token: ")
    assert token_authenticate(token).user == user

    again = connect("claude-code", "--proxy", "--url", url, "--user", user.username, "--write")
    assert "already up to date" in again  # the working token is kept, nothing rewritten

    connect("claude-code", "--proxy", "--remove", "--write")
    assert json.loads(settings.read_text()) == theirs


def test_proxy_is_for_the_three_agents_and_needs_the_url(home, user):
    with pytest.raises(CommandError, match="claude-code, codex and opencode"):
        connect("gemini", "--proxy", "--url", "http://x", "--user", user.username)
    with pytest.raises(CommandError, match="--url"):
        connect("claude-code", "--proxy", "--user", user.username)
