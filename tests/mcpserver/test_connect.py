"""`manage.py lcm_connect`: each agent's entry in its own format and file, merged with a
backup first, idempotent, every other key (and a TOML file's comments) untouched."""

from __future__ import annotations

import io
import json
import shlex
import tomllib

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.support.tokens import issue_token
from tokens.services import token_authenticate

pytestmark = pytest.mark.django_db


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A home of its own, and none of the agents' variables from the outside."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "OPENCODE_CONFIG", "XDG_CONFIG_HOME",
                 "LCM_DATABASE_URL", "LCM_CONFIG_FILE"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LCM_DATA_DIR", "/srv/lcm data")
    return home


def connect(*args) -> str:
    out = io.StringIO()
    call_command("lcm_connect", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def backups(path):
    return sorted(path.parent.glob(f"{path.name}.lcm-backup-*"))


def test_claude_code_user_scope_merges_the_server_and_hooks_and_keeps_the_rest(home, user):
    config = home / ".claude.json"
    config.write_text(json.dumps({"numStartups": 7, "mcpServers": {"other": {"command": "x"}}}))
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    theirs = {"hooks": [{"type": "command", "command": "echo mine"}]}
    older = {"hooks": [{"type": "command", "timeout": 30,  # what earlier versions wrote
                        "command": "/py /x/manage.py lcm_hook session-start --user old"}]}  # fmt: skip
    hooks = {"PreCompact": [theirs], "Stop": [theirs], "SessionStart": [older]}
    settings.write_text(json.dumps({"model": "opus", "hooks": hooks}, indent=4))
    printed = connect("claude-code", "--user", user.username)
    assert json.loads(config.read_text())["mcpServers"] == {
        "other": {"command": "x"}
    }  # printed only
    assert '"lcm"' in printed and "hooks/client.py session-start" in printed

    connect("claude-code", "--user", user.username, "--write")
    data = json.loads(config.read_text())
    assert data["numStartups"] == 7 and data["mcpServers"]["other"] == {"command": "x"}
    entry = data["mcpServers"]["lcm"]
    assert entry["type"] == "stdio"
    assert entry["args"][-3:] == ["lcm_mcp", "--user", user.username]
    assert entry["env"] == {"LCM_DATA_DIR": "/srv/lcm data"}
    hooks = json.loads(settings.read_text())
    assert hooks["model"] == "opus" and hooks["hooks"]["Stop"] == [theirs]
    pre = hooks["hooks"]["PreCompact"]
    assert pre[0] == theirs and len(pre) == 2
    command = shlex.split(pre[1]["hooks"][0]["command"])
    assert command[:2] == ["env", "LCM_DATA_DIR=/srv/lcm data"]
    assert command[-3:] == ["pre-compact", "--user", user.username]
    assert len(hooks["hooks"]["SessionStart"]) == 1  # the older group replaced
    start = hooks["hooks"]["SessionStart"][0]["hooks"][0]
    assert "hooks/client.py session-start" in start["command"] and start["type"] == "command"
    assert start["timeout"] == 10  # a backstop: the client answers within 2 s
    assert settings.read_text().startswith('{\n    "model"')  # its own indentation kept
    assert len(backups(config)) == 1 and len(backups(settings)) == 1

    # Again: nothing changes, nothing is written, no new backup.
    before = (config.read_text(), settings.read_text())
    again = connect("claude-code", "--user", user.username, "--write")
    assert again.count("already up to date") == 2
    assert (config.read_text(), settings.read_text()) == before
    assert len(backups(config)) == 1 and len(backups(settings)) == 1


def test_claude_code_project_scope_over_http(home, tmp_path, user):
    project = tmp_path / "repo"
    project.mkdir()
    key = issue_token(user)
    connect("claude-code", "--scope", "project", "--project-dir", str(project),
            "--url", "http://lcm.example:8000/mcp/", "--token", key, "--write")  # fmt: skip
    entry = json.loads((project / ".mcp.json").read_text())["mcpServers"]["lcm"]
    assert entry == {
        "type": "http",
        "url": "http://lcm.example:8000/mcp/",
        "headers": {"Authorization": f"Bearer {key}"},
    }
    local = json.loads((project / ".claude" / "settings.local.json").read_text())
    command = local["hooks"]["PreCompact"][0]["hooks"][0]["command"]
    assert shlex.split(command)[-5:] == [
        "pre-compact", "--server", "http://lcm.example:8000", "--token", key,
    ]  # fmt: skip
    assert not backups(project / ".mcp.json")  # a new file has nothing to back up


def test_codex_toml_keeps_comments_and_honours_codex_home(home, tmp_path, monkeypatch, user):
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    monkeypatch.setenv("CODEX_HOME", str(codex_home))
    config = codex_home / "config.toml"
    original = (
        '# my settings\nmodel = "gpt-5"  # the default model\n\n'
        '[mcp_servers.docs]\n# the docs server\ncommand = "docs-mcp"\n'
    )
    config.write_text(original)
    connect("codex", "--user", user.username, "--write")
    text = config.read_text()
    assert text.startswith(original)  # every byte of what was there, comments included
    parsed = tomllib.loads(text)
    assert parsed["mcp_servers"]["docs"] == {"command": "docs-mcp"}
    assert parsed["mcp_servers"]["lcm"]["args"][-3:] == ["lcm_mcp", "--user", user.username]
    assert parsed["mcp_servers"]["lcm"]["env"] == {"LCM_DATA_DIR": "/srv/lcm data"}

    # Over HTTP with a token issued for the user; run again, the same token is kept.
    connect("codex", "--user", user.username, "--url", "http://127.0.0.1:8000", "--write")
    lcm = tomllib.loads(config.read_text())["mcp_servers"]["lcm"]
    assert lcm["url"] == "http://127.0.0.1:8000/mcp/"
    key = lcm["http_headers"]["Authorization"].removeprefix("Bearer ")
    assert token_authenticate(key).user == user
    written = config.read_text()
    connect("codex", "--user", user.username, "--url", "http://127.0.0.1:8000", "--write")
    assert config.read_text() == written
    assert config.read_text().startswith(original)
    assert len(backups(config)) == 2


def test_opencode_and_gemini_shapes(home, user):
    key = issue_token(user)
    connect("opencode", "--user", user.username, "--write")
    opencode = json.loads((home / ".config" / "opencode" / "opencode.json").read_text())
    assert opencode["$schema"] == "https://opencode.ai/config.json"
    local = opencode["mcp"]["lcm"]
    assert local["type"] == "local" and local["enabled"] is True
    assert local["command"][-3:] == ["lcm_mcp", "--user", user.username]
    assert local["environment"] == {"LCM_DATA_DIR": "/srv/lcm data"}

    gemini = home / ".gemini" / "settings.json"
    gemini.parent.mkdir()
    gemini.write_text(json.dumps({"theme": "Dracula", "mcpServers": {"git": {"command": "g"}}}))
    connect("gemini", "--url", "https://lcm.example", "--token", key, "--write")
    data = json.loads(gemini.read_text())
    assert data["theme"] == "Dracula" and data["mcpServers"]["git"] == {"command": "g"}
    assert data["mcpServers"]["lcm"] == {
        "httpUrl": "https://lcm.example/mcp/",
        "headers": {"Authorization": f"Bearer {key}"},
    }


def test_what_it_refuses(home, user, other_user):
    (home / ".gemini").mkdir()
    jsonc = home / ".gemini" / "settings.json"
    jsonc.write_text('{\n  // a comment\n  "theme": "x"\n}\n')
    with pytest.raises(CommandError, match="not plain JSON"):
        connect("gemini", "--user", user.username, "--write")
    assert jsonc.read_text() == '{\n  // a comment\n  "theme": "x"\n}\n' and not backups(jsonc)
    with pytest.raises(CommandError, match="no active user"):
        connect("codex", "--user", "nobody")
    with pytest.raises(CommandError, match="another user"):
        connect("codex", "--user", user.username, "--token", issue_token(other_user))
    with pytest.raises(CommandError, match="http"):
        connect("codex", "--user", user.username, "--url", "ftp://x")
