"""What the hooks hand back after an agent compacted its own session, and at the start of a
session that continues earlier work (docs/capture.md, "Repair after the agent's compaction").

Claude Code 2.1 runs, around a compaction: PreCompact (the transcript is caught up: the span
the agent is about to replace is stored whole), then SessionStart with source `compact`, then
PostCompact with the agent's summary in `compact_summary`; it writes the compaction to its
transcript only after these. So:

- PostCompact links the compaction from its input (an agent-compaction summary over the
  messages since the previous one) and draws its repair (`importers.repair`), stored;
- the repair is handed back once, by the first hook after it that may add context: the
  next UserPromptSubmit (Claude Code, Codex), or a SessionStart `compact` / `resume` of an
  agent that runs it after the summary is known (Codex);
- SessionStart with source `startup` in a project with a session that ended within
  `LCM_HANDOFF_RECENT_HOURS`: the hand-off of that session (its last messages, said as what
  happened), so a new session, in any agent, can continue it.
"""

from __future__ import annotations

import hashlib
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


def _session(hook_input: dict) -> str:
    value = hook_input.get("session_id")
    return value if isinstance(value, str) else ""


def store_compaction(*, user, hook_input: dict, agent: str):
    """PostCompact: the compaction linked from the hook input and its repair drawn and
    stored; the repair, or None."""
    from importers.repair import link_hook_compaction, session_repair

    session_id = _session(hook_input)
    if not enabled() or not session_id:
        return None
    catch_up(user=user, hook_input=hook_input, agent=agent)
    summary = hook_input.get("compact_summary")
    if isinstance(summary, str) and summary.strip():
        key = hook_input.get("prompt_id") or hashlib.sha256(summary.encode()).hexdigest()[:16]
        trigger = hook_input.get("trigger")
        link_hook_compaction(
            owner=user,
            session_id=session_id,
            summary=summary,
            author=agent,
            key=str(key),
            trigger=trigger if isinstance(trigger, str) else "",
        )
    return session_repair(owner=user, session_id=session_id)


def pending_context(*, user, hook_input: dict, agent: str, event: str, fresh: bool) -> str:
    """The repair of the session's latest agent compaction when it has not been handed
    back yet ("" otherwise), marked as handed back through `event`. `fresh`: catch the
    transcript up first (a SessionStart, which the agent runs after writing it)."""
    from importers.repair import deliver_once, session_repair

    session_id = _session(hook_input)
    if not enabled() or not session_id:
        return ""
    if fresh:
        catch_up(user=user, hook_input=hook_input, agent=agent)
    repair = session_repair(owner=user, session_id=session_id)
    if repair is None or not repair.text or repair.deliveries:
        return ""
    return repair.text if deliver_once(repair, event) else ""


def pending_text(*, user, hook_input: dict) -> str:
    """The repair of the session's latest agent compaction when it has not been handed
    back yet ("" otherwise), not marked (the hook client hands it back, then
    `pending_context` marks it)."""
    from importers.repair import session_repair

    session_id = _session(hook_input)
    if not enabled() or not session_id:
        return ""
    repair = session_repair(owner=user, session_id=session_id)
    if repair is None or not repair.text or repair.deliveries:
        return ""
    return repair.text


def handoff_context(*, user, hook_input: dict) -> str:
    """The hand-off of the most recent other session in the hook's project, when it ended
    within `LCM_HANDOFF_RECENT_HOURS` (0: never)."""
    from importers.repair import recent_session, session_handoff

    hours = float(getattr(settings, "LCM_HANDOFF_RECENT_HOURS", 0))
    cwd = hook_input.get("cwd")
    if not enabled() or not hours or not isinstance(cwd, str) or not cwd:
        return ""
    conversation = recent_session(
        owner=user, project=cwd, exclude_session=_session(hook_input), hours=hours
    )
    if conversation is None:
        return ""
    return session_handoff(conversation=conversation).text
