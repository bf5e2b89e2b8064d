"""Claude Code's hooks for this server, in its settings file (`hooks` key):

- SessionStart runs `mcpserver/hooks/client.py session-start` (a note that past sessions
  are searchable through the MCP tools, the user's pinned facts, and at startup the
  hand-off of the project's recent session);
- PreCompact runs `mcpserver/hooks/client.py pre-compact` (the transcript is caught up,
  through the hook spool);
- PostCompact runs `mcpserver/hooks/client.py post-compact` (the compaction is linked from
  the hook's `compact_summary` and its repair drawn, in a detached process);
- UserPromptSubmit runs `mcpserver/hooks/client.py user-prompt-submit` (a repair not handed
  back yet goes to the model with the next prompt; nothing otherwise, without starting
  Django).

The client is standard-library Python run as a file: it answers within 2 s whatever happens
(mcpserver/hooks/client.py), so the timeouts here are only a backstop.

Each is one matcher group `{"hooks": [{"type": "command", "command": ..., "timeout": s}]}`
with no matcher (every source / trigger). Merging replaces our own group (found by its
`lcm_hook EVENT` command) where it was and keeps every other hook.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mcpserver.connect.target import ServerTarget
from mcpserver.server import SERVER_NAME

# Claude Code event -> (the hook client's event argument, timeout in seconds)
EVENTS = {
    "SessionStart": ("session-start", 10),
    "PreCompact": ("pre-compact", 10),
    "PostCompact": ("post-compact", 10),
    "UserPromptSubmit": ("user-prompt-submit", 10),
}
CLIENT = Path(__file__).resolve().parents[1] / "hooks" / "client.py"


def settings_path(scope: str, project: Path) -> Path:
    """User scope: ~/.claude/settings.json ($CLAUDE_CONFIG_DIR/settings.json when set).
    Project scope: .claude/settings.local.json, which is not committed (it holds a token
    or a user name)."""
    if scope == "project":
        return project / ".claude" / "settings.local.json"
    config_dir = os.environ.get("CLAUDE_CONFIG_DIR")
    return (
        Path(config_dir) / "settings.json"
        if config_dir
        else Path.home() / ".claude" / ("settings.json")
    )


def _owner_args(target: ServerTarget, server_name: str) -> list[str]:
    if target.transport == "http":
        args = ["--server", target.base_url, "--token", target.token]
    else:
        args = ["--user", target.username]
    if server_name != SERVER_NAME:
        args += ["--server-name", server_name]
    return args


def hook_groups(target: ServerTarget, server_name: str) -> dict[str, dict]:
    groups = {}
    for event, (argument, timeout) in EVENTS.items():
        client = [sys.executable, str(CLIENT), argument, *_owner_args(target, server_name)]
        command = target.shell_line(client)
        groups[event] = {"hooks": [{"type": "command", "command": command, "timeout": timeout}]}
    return groups


def _ours(group, argument: str) -> bool:
    """Our group: the hook client's command, or the `manage.py lcm_hook` of older versions."""
    hooks = group.get("hooks") if isinstance(group, dict) else None
    commands = [str(h.get("command", "")) for h in hooks or [] if isinstance(h, dict)]
    ours = (f"lcm_hook {argument}", f"{CLIENT.parent.name}/{CLIENT.name} {argument}")
    return isinstance(hooks, list) and any(mark in c for c in commands for mark in ours)


def merge_hooks(settings: dict, groups: dict[str, dict]) -> None:
    """Put `groups` into `settings["hooks"]` in place, replacing our earlier ones."""
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise ValueError("the settings' hooks is not an object")
    for event, group in groups.items():
        existing = hooks.get(event) or []
        if not isinstance(existing, list):
            raise ValueError(f"the settings' hooks.{event} is not a list")
        argument = EVENTS[event][0]
        where = next((i for i, g in enumerate(existing) if _ours(g, argument)), len(existing))
        kept = [g for i, g in enumerate(existing) if i < where or not _ours(g, argument)]
        kept.insert(min(where, len(kept)), group)
        hooks[event] = kept
