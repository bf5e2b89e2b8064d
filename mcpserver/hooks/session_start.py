"""SessionStart: a short note for the agent that its past sessions (of every agent and
project) are reachable through this server's MCP tools, with the user's pinned facts
within a small token cap. Output: Claude Code's hook JSON,
`{"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": ...}}`, made
here for the local hook (`manage.py lcm_hook`) and for the remote one
(`POST /api/v1/hooks/session-start/`): the hook client prints it as it is, so whatever is
added to it here reaches the agent."""

from __future__ import annotations

from core.token_estimate import estimate

DEFAULT_PINS_TOKEN_CAP = 300

NOTE = (
    "Lossless memory of past sessions is available through the MCP server `{server}`: "
    "every message of your earlier sessions in Claude Code, Codex, OpenCode and Gemini CLI, "
    "in every project, is kept, including what compaction dropped from your context. "
    "Before redoing work or when the user refers to earlier work, search it: `lcm_grep` "
    "(filters: agent, project directory, since/before; each hit names its agent, project, "
    "session and time), then `lcm_describe` / `lcm_expand` to read what a hit points to, "
    "or `lcm_expand_query` to ask a question over it."
)


def local_pins(user) -> list[str]:
    """The pinned facts of the user's chat sessions (their active branches), newest
    session first, each text once."""
    from turns.models import Session

    sessions = (
        Session.objects.filter(owner=user, active_branch__isnull=False)
        .select_related("active_branch__head_state")
        .order_by("-updated_at")
    )
    texts: list[str] = []
    for session in sessions:
        state = session.active_branch.head_state
        for pin in (state.pinned_facts if state else None) or []:
            text = (pin.get("text") or "").strip()
            if text and text not in texts:
                texts.append(text)
    return texts


def pins_within(texts: list[str], token_cap: int) -> tuple[list[str], int]:
    """The first pins that fit in `token_cap` tokens, and how many were left out."""
    kept, used = [], 0
    for text in texts:
        cost = estimate(text) + 2
        if used + cost > token_cap:
            break
        kept.append(text)
        used += cost
    return kept, len(texts) - len(kept)


def session_start_output(
    *, server_name: str, pins: list[str], token_cap: int, repair: str = ""
) -> dict:
    """`repair`: what the product hands back after a compaction, or a hand-off
    (mcpserver.hooks.repair), after the note and the pins."""
    context = NOTE.format(server=server_name)
    kept, left_out = pins_within(pins, token_cap)
    if kept:
        context += "\n\nPinned facts:\n" + "\n".join(f"- {text}" for text in kept)
    if left_out:
        context += f"\n({left_out} more pinned facts: memory_search or GET /api/v1/sessions/)"
    if repair:
        context += "\n\n" + repair
    return {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": context}}


def session_start_answer(
    *,
    user,
    hook_input: dict,
    server_name: str,
    token_cap: int = DEFAULT_PINS_TOKEN_CAP,
    repair: str = "",
) -> dict:
    """The SessionStart answer for `user`. `hook_input` is Claude Code's (session_id,
    source: startup, resume, clear or compact, cwd) for what adds to the answer; `repair`:
    what is handed back (mcpserver/hooks/repair.py), after the note and the pins."""
    pins = local_pins(user) if user is not None and token_cap > 0 else []
    return session_start_output(
        server_name=server_name, pins=pins, token_cap=max(0, token_cap), repair=repair
    )
