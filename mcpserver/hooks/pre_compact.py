"""PreCompact: catch up the session's transcript before Claude Code compacts it, so what
the compaction drops from the agent's view is stored.

The hook client (client.py) writes the hook input to its spool and starts a detached
`manage.py lcm_hook replay`, which imports each spooled transcript through the same
idempotent importer as `manage.py lcm_import claude-code` (only what is new is added, its
sub-agent files too) and removes the entry once the import is stored. Nothing waits on the
database: an entry that cannot be stored now stays for the next replay.
"""

from __future__ import annotations

from pathlib import Path

from mcpserver.hooks.client import owner_key, spool_entries

FORMAT = "claude-code"


class HookInputError(Exception):
    """The hook input does not name a transcript file that can be read."""


def transcript_of(hook_input: dict) -> Path:
    value = hook_input.get("transcript_path")
    if not isinstance(value, str) or not value:
        raise HookInputError("the hook input has no transcript_path")
    path = Path(value).expanduser()
    if not path.is_file():
        raise HookInputError(f"transcript_path {value!r} is not a file")
    return path


def catch_up_locally(*, path: Path, user) -> str:
    from importers.services import import_file

    report = import_file(format=FORMAT, path=path, owner=user)
    added = sum(result.counts.get("messages", 0) for result in report.conversations)
    return f"lcm: {path.name}: {added} new messages stored"


def replay_spool(*, user, spool: Path | None = None) -> list[str]:
    """Import every transcript the user's hooks spooled; each entry goes once stored (or
    once its transcript is gone). What was said, per entry."""
    said = []
    for entry_path, entry in spool_entries(owner=owner_key(user=user.username, server=None),
                                           directory=spool):  # fmt: skip
        try:
            path = transcript_of(entry.get("hook_input") or {})
        except HookInputError as error:
            said.append(f"lcm: {error}; dropped from the spool")
        else:
            said.append(catch_up_locally(path=path, user=user))
        entry_path.unlink(missing_ok=True)
    return said
