"""`lcm_connect codex --write` gives the lcm tools on Codex's first turn: Codex's own model
catalog (what `codex debug models` prints) written beside its config with tool search off,
and `model_catalog_json` naming it (mcpserver/connect/codex_catalog.py). A stand-in `codex`
program prints a catalog of the real one's shape."""

from __future__ import annotations

import io
import json
import os
import tomllib

import pytest
from django.core.management import call_command

pytestmark = pytest.mark.django_db

CATALOG = {
    "models": [
        {"slug": "gpt-5.5", "supports_search_tool": True, "apply_patch_tool_type": "freeform"},
        {"slug": "codex-auto-review", "supports_search_tool": True, "shell_type": "x"},
    ]
}


@pytest.fixture
def codex_home(tmp_path, monkeypatch):
    home = tmp_path / "codex-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("CODEX_HOME", str(home))
    monkeypatch.delenv("LCM_CONFIG_FILE", raising=False)
    return home


def _codex_on_path(tmp_path, monkeypatch, catalog: dict | None) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    program = bin_dir / "codex"
    printed = json.dumps(catalog) if catalog is not None else "not json"
    (tmp_path / "catalog.out").write_text(printed)
    program.write_text(f'#!/bin/sh\n[ "$1 $2" = "debug models" ] && cat {tmp_path}/catalog.out\n')
    program.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")


def connect(*args) -> str:
    out = io.StringIO()
    call_command("lcm_connect", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_codexs_catalog_is_written_without_tool_search_and_selected(
    codex_home, tmp_path, monkeypatch, user
):
    _codex_on_path(tmp_path, monkeypatch, CATALOG)
    config = codex_home / "config.toml"
    config.write_text('# mine\nmodel = "gpt-5.5"\n\n[mcp_servers.docs]\ncommand = "docs"\n')
    connect("codex", "--user", user.username, "--write")

    written = json.loads((codex_home / "lcm-model-catalog.json").read_text())
    assert written == {
        "models": [
            {**CATALOG["models"][0], "supports_search_tool": False},
            {**CATALOG["models"][1], "supports_search_tool": False},
        ]
    }
    parsed = tomllib.loads(config.read_text())
    assert parsed["model_catalog_json"] == str(codex_home / "lcm-model-catalog.json")
    assert parsed["model"] == "gpt-5.5"
    assert parsed["mcp_servers"]["docs"] == {"command": "docs"}
    assert "lcm" in parsed["mcp_servers"]
    assert config.read_text().startswith("# mine\n")

    again = config.read_text()
    out = connect("codex", "--user", user.username, "--write")
    assert config.read_text() == again
    assert out.count("already up to date") == 3  # the entry, the catalog, the key


def test_a_catalog_of_the_users_own_is_left_alone(codex_home, tmp_path, monkeypatch, user):
    _codex_on_path(tmp_path, monkeypatch, CATALOG)
    config = codex_home / "config.toml"
    config.write_text('model_catalog_json = "/home/me/models.json"\n')
    out = connect("codex", "--user", user.username, "--write")
    assert tomllib.loads(config.read_text())["model_catalog_json"] == "/home/me/models.json"
    assert "names a catalog of your own" in out


@pytest.mark.parametrize("catalog", [None, {"no": "models"}])
def test_without_a_codex_that_gives_its_catalog_only_the_entry_is_written(
    codex_home, tmp_path, monkeypatch, user, catalog
):
    _codex_on_path(tmp_path, monkeypatch, catalog)
    out = connect("codex", "--user", user.username, "--write")
    parsed = tomllib.loads((codex_home / "config.toml").read_text())
    assert "model_catalog_json" not in parsed and "lcm" in parsed["mcp_servers"]
    assert not (codex_home / "lcm-model-catalog.json").exists()
    assert "catalog was not written" in out
