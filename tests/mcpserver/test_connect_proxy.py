"""`manage.py lcm_connect codex|opencode --proxy`: the agent's model calls through the
drop-in, merged into its own config (every other key untouched, a backup first), selected,
idempotent, and taken out again by --remove."""

from __future__ import annotations

import io
import json
import tomllib

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.factories import UserFactory
from tokens.services import token_authenticate

pytestmark = pytest.mark.django_db

CODEX_BEFORE = """# my settings
model = "gpt-5.5"

[mcp_servers.other]
command = "other-server"
"""


@pytest.fixture
def home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("CODEX_HOME", "OPENCODE_CONFIG", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(name, raising=False)
    UserFactory(username="ann")
    return home


def connect(*args) -> str:
    out = io.StringIO()
    call_command("lcm_connect", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_codex_proxy_adds_and_selects_the_provider_and_remove_restores_the_file(home):
    config = home / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text(CODEX_BEFORE)

    connect("codex", "--proxy", "--url", "http://127.0.0.1:8111", "--user", "ann")
    data = tomllib.loads(config.read_text())
    provider = data["model_providers"]["lcm"]
    assert data["model_provider"] == "lcm"
    assert provider["base_url"] == "http://127.0.0.1:8111/openai/v1"
    assert provider["wire_api"] == "responses"
    token = provider["http_headers"]["X-LCM-Token"]
    assert token_authenticate(token).user.username == "ann"
    assert data["model"] == "gpt-5.5" and data["mcp_servers"]["other"]["command"] == "other-server"
    assert "# my settings" in config.read_text()
    assert list(config.parent.glob("config.toml.lcm-backup-*"))

    connect("codex", "--proxy", "--remove")
    assert config.read_text() == CODEX_BEFORE


def test_codex_proxy_can_forward_the_users_own_key(home):
    connect(
        "codex",
        "--proxy",
        "--url",
        "http://h:1",
        "--user",
        "ann",
        "--forward-key",
        "OPENAI_API_KEY",
    )
    provider = tomllib.loads((home / ".codex" / "config.toml").read_text())["model_providers"][
        "lcm"
    ]
    assert provider["env_key"] == "OPENAI_API_KEY"


def test_opencode_proxy_points_the_openai_provider_at_the_drop_in(home):
    path = home / ".config" / "opencode" / "opencode.json"
    path.parent.mkdir(parents=True)
    before = {"model": "openai/gpt-5.5", "provider": {"openai": {"options": {"timeout": 5}}}}
    path.write_text(json.dumps(before, indent=2))

    connect("opencode", "--proxy", "--url", "http://127.0.0.1:8111/", "--user", "ann")
    options = json.loads(path.read_text())["provider"]["openai"]["options"]
    assert options["baseURL"] == "http://127.0.0.1:8111/openai/v1"
    assert token_authenticate(options["headers"]["X-LCM-Token"]).user.username == "ann"
    assert options["timeout"] == 5

    connect("opencode", "--proxy", "--remove")
    assert json.loads(path.read_text()) == before


def test_proxy_needs_a_url_and_a_proxy_capable_agent(home):
    with pytest.raises(CommandError, match="--url"):
        connect("codex", "--proxy", "--user", "ann")
    with pytest.raises(CommandError, match="codex and opencode"):
        connect("gemini", "--proxy", "--url", "http://h:1", "--user", "ann")


def test_running_codex_proxy_again_keeps_its_live_token(home):
    config = home / ".codex" / "config.toml"
    connect("codex", "--proxy", "--url", "http://h:1", "--user", "ann")
    first = tomllib.loads(config.read_text())["model_providers"]["lcm"]["http_headers"]
    out = connect("codex", "--proxy", "--url", "http://h:1", "--user", "ann")
    again = tomllib.loads(config.read_text())["model_providers"]["lcm"]["http_headers"]
    assert again == first and token_authenticate(first["X-LCM-Token"]) is not None
    assert "already up to date" in out
