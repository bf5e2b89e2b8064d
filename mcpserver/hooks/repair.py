"""What the hooks hand back after an agent compacted its own session, and at the start of a
session that continues earlier work (docs/capture.md, "Repair after the agent's compaction").

- `SessionStart` with source `compact` (Claude Code, Codex) or `resume`: the transcript is
  caught up (the agent's compaction becomes an agent-compaction summary over the messages it
  replaced), and the addendum of the session's latest agent compaction is returned: what
  the agent's summary dropped that the work still needs (`importers.repair`).
- `PostCompact` (Claude Code, Codex: no context may be returned there): the same catch-up
  and addendum, stored, so the `SessionStart` that follows only reads it.
- `SessionStart` with source `startup` in a project with a session that ended within
  `LCM_HANDOFF_RECENT_HOURS`: the hand-off of that session (its last messages, said as
  what happened), so a new session, in any agent, can continue it.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

FORMATS = {"claude-code": "claude-code", "codex": "codex", "gemini": "gemini"}


def enabled() -> bool:
    return bool(getattr(settings, "LCM_REPAIR_ENABLED", True))


def catch_up(*, user, hook_input: dict, agent: str) -> None:
    """Import the hook's transcript (only what is new), when it names one that exists."""
    from importers.services import import_file

    value = hook_input.get("transcript_path")
    if not isinstance(value, str) or not value:
        return
    path = Path(value).expanduser()
    if path.is_file():
        import_file(format=FORMATS.get(agent, "claude-code"), path=path, owner=user)


def compaction_context(*, user, hook_input: dict, agent: str, event: str) -> str:
    """The addendum of the session's latest agent compaction ("" when it has none, or the
    agent's summary lost nothing that fits), noted as delivered through `event`."""
    from importers.repair import delivered, session_repair

    session_id = hook_input.get("session_id")
    if not enabled() or not isinstance(session_id, str) or not session_id:
        return ""
    catch_up(user=user, hook_input=hook_input, agent=agent)
    repair = session_repair(owner=user, session_id=session_id)
    if repair is None or not repair.text:
        return ""
    if event:
        delivered(repair, event)
    return repair.text


def handoff_context(*, user, hook_input: dict) -> str:
    """The hand-off of the most recent other session in the hook's project, when it ended
    within `LCM_HANDOFF_RECENT_HOURS` (0: never)."""
    from importers.repair import recent_session, session_handoff

    hours = float(getattr(settings, "LCM_HANDOFF_RECENT_HOURS", 0))
    cwd = hook_input.get("cwd")
    if not enabled() or not hours or not isinstance(cwd, str) or not cwd:
        return ""
    session_id = hook_input.get("session_id")
    conversation = recent_session(
        owner=user,
        project=cwd,
        exclude_session=session_id if isinstance(session_id, str) else "",
        hours=hours,
    )
    if conversation is None:
        return ""
    return session_handoff(conversation=conversation).text
