"""Claude Code's hooks for this server, in its settings file (`hooks` key):

- SessionStart runs `manage.py lcm_hook session-start` (a note that past sessions are
  searchable through the MCP tools, and the user's pinned facts);
- PreCompact runs `manage.py lcm_hook pre-compact` (the transcript is caught up before
  the agent compacts);
- PostCompact runs `manage.py lcm_hook post-compact` (the compaction is linked from the
  hook's `compact_summary` and its repair drawn and stored);
- UserPromptSubmit runs `manage.py lcm_hook user-prompt-submit` (a repair not handed back
  yet goes to the model with the next prompt; nothing otherwise).

Each is one matcher group `{"hooks": [{"type": "command", "command": ..., "timeout": s}]}`
with no matcher (every source / trigger). Merging replaces our own group (found by its
`lcm_hook EVENT` command) where it was and keeps every other hook.
"""

from __future__ import annotations

import os
from pathlib import Path

from mcpserver.connect.target import ServerTarget
from mcpserver.server import SERVER_NAME

# Claude Code event -> (lcm_hook's event argument, timeout in seconds)
EVENTS = {
    "SessionStart": ("session-start", 30),
    "PreCompact": ("pre-compact", 300),
    "PostCompact": ("post-compact", 60),
    "UserPromptSubmit": ("user-prompt-submit", 30),
}


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
        command = target.shell("lcm_hook", argument, *_owner_args(target, server_name))
        groups[event] = {"hooks": [{"type": "command", "command": command, "timeout": timeout}]}
    return groups


def _ours(group, argument: str) -> bool:
    hooks = group.get("hooks") if isinstance(group, dict) else None
    return isinstance(hooks, list) and any(
        isinstance(h, dict) and f"lcm_hook {argument}" in str(h.get("command", "")) for h in hooks
    )


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
