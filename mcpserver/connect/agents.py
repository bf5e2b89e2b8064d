"""Each coding agent's MCP configuration: where its file is and the entry's shape, as the
agents document them (docs/capture.md links each one).

- Claude Code: `mcpServers` in `~/.claude.json` (user scope; `$CLAUDE_CONFIG_DIR/.claude.json`
  when that is set) or the project's `.mcp.json`; stdio `{type, command, args, env}`, HTTP
  `{type: "http", url, headers}`.
- Codex CLI: `[mcp_servers.NAME]` in `$CODEX_HOME/config.toml` (default `~/.codex`) or the
  project's `.codex/config.toml`; stdio `command`, `args`, `env`; HTTP `url`, `http_headers`;
  both `startup_timeout_sec`.
- OpenCode: `mcp` in `~/.config/opencode/opencode.json` (`$XDG_CONFIG_HOME`, or the file
  `$OPENCODE_CONFIG` names) or the project's `opencode.json`; `{type: "local", command:
  [...], environment, enabled}` or `{type: "remote", url, headers, enabled}`.
- Gemini CLI: `mcpServers` in `~/.gemini/settings.json` or the project's
  `.gemini/settings.json`; stdio `{command, args, env}`, HTTP `{httpUrl, headers}`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mcpserver.connect.target import ServerTarget

SCOPES = ("user", "project")


@dataclass(frozen=True)
class AgentConfig:
    name: str
    kind: str  # "json" or "toml"
    keys: tuple[str, ...]  # where the server entries are, in the file
    entry: Callable[[ServerTarget], dict]
    path: Callable[[str, Path], Path]  # (scope, project dir) -> the file
    new_file: dict = field(default_factory=dict)  # what a file made from nothing starts with


def _home() -> Path:
    return Path.home()


def _claude_code_path(scope: str, project: Path) -> Path:
    if scope == "project":
        return project / ".mcp.json"
    config_dir = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(config_dir) / ".claude.json" if config_dir else _home() / ".claude.json"


def _claude_code_entry(target: ServerTarget) -> dict:
    if target.transport == "http":
        return {
            "type": "http",
            "url": target.mcp_url,
            "headers": {"Authorization": target.authorization},
        }
    command = target.stdio_command()
    return {"type": "stdio", "command": command[0], "args": command[1:], "env": target.env}


def codex_home() -> Path:
    return Path(os.environ.get("CODEX_HOME") or _home() / ".codex")


def _codex_path(scope: str, project: Path) -> Path:
    return (
        project / ".codex" / "config.toml" if scope == "project" else codex_home() / "config.toml"
    )


# Codex gives a server this long to start (its default is 10 s); the handshake itself is
# answered at once (mcpserver/stdio_front.py), the first tool call waits for the rest.
CODEX_STARTUP_TIMEOUT_SEC = 60


def _codex_entry(target: ServerTarget) -> dict:
    if target.transport == "http":
        return {
            "url": target.mcp_url,
            "http_headers": {"Authorization": target.authorization},
            "startup_timeout_sec": CODEX_STARTUP_TIMEOUT_SEC,
        }
    command = target.stdio_command()
    return {
        "command": command[0],
        "args": command[1:],
        "env": target.env,
        "startup_timeout_sec": CODEX_STARTUP_TIMEOUT_SEC,
    }


def _opencode_path(scope: str, project: Path) -> Path:
    if scope == "project":
        return project / "opencode.json"
    if os.environ.get("OPENCODE_CONFIG"):
        return Path(os.environ["OPENCODE_CONFIG"])
    config = os.environ.get("XDG_CONFIG_HOME") or str(_home() / ".config")
    return Path(config) / "opencode" / "opencode.json"


def _opencode_entry(target: ServerTarget) -> dict:
    if target.transport == "http":
        return {
            "type": "remote",
            "url": target.mcp_url,
            "headers": {"Authorization": target.authorization},
            "enabled": True,
        }
    return {
        "type": "local",
        "command": target.stdio_command(),
        "environment": target.env,
        "enabled": True,
    }


def _gemini_path(scope: str, project: Path) -> Path:
    base = project if scope == "project" else _home()
    return base / ".gemini" / "settings.json"


def _gemini_entry(target: ServerTarget) -> dict:
    if target.transport == "http":
        return {"httpUrl": target.mcp_url, "headers": {"Authorization": target.authorization}}
    command = target.stdio_command()
    return {"command": command[0], "args": command[1:], "env": target.env}


AGENTS = {
    "claude-code": AgentConfig(
        "claude-code", "json", ("mcpServers",), _claude_code_entry, _claude_code_path
    ),
    "codex": AgentConfig("codex", "toml", ("mcp_servers",), _codex_entry, _codex_path),
    "opencode": AgentConfig(
        "opencode",
        "json",
        ("mcp",),
        _opencode_entry,
        _opencode_path,
        new_file={"$schema": "https://opencode.ai/config.json"},
    ),
    "gemini": AgentConfig("gemini", "json", ("mcpServers",), _gemini_entry, _gemini_path),
}
