"""PreCompact: catch up the session's transcript before Claude Code compacts it, so what
the compaction drops from the agent's view is stored first.

The transcript (`transcript_path` of the hook input) goes through the same idempotent
importer as `manage.py lcm_import claude-code`: only what is new is added (its sub-agent
files too). With `--server`, the file is uploaded to that server's import API instead
(`POST /api/v1/imports/`, the same importer there; sub-agent files stay local).
"""

from __future__ import annotations

from pathlib import Path

from mcpserver.hooks.remote import Remote

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


def catch_up_remotely(*, path: Path, remote: Remote) -> str:
    job = remote.upload("/api/v1/imports/", {"format": FORMAT}, path) or {}
    return f"lcm: {path.name}: import job {job.get('id')} {job.get('state', '')}".rstrip()
