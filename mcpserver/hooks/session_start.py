"""SessionStart: a short note for the agent that its past sessions (of every agent and
project) are reachable through this server's MCP tools, with the user's pinned facts
within a small token cap. Output: Claude Code's hook JSON,
`{"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": ...}}`."""

from __future__ import annotations

from core.token_estimate import estimate
from mcpserver.hooks.remote import Remote

DEFAULT_PINS_TOKEN_CAP = 300
REMOTE_SESSIONS_READ = 10  # the most recent chat sessions whose pins a remote hook reads

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


def remote_pins(remote: Remote) -> list[str]:
    """The same through the HTTP API: the newest chat sessions' active branch states."""
    page = remote.get("/api/v1/sessions/") or {}
    texts: list[str] = []
    for session in (page.get("results") or [])[:REMOTE_SESSIONS_READ]:
        branch = session.get("active_branch_id")
        if not branch:
            continue
        state = remote.get(f"/api/v1/branches/{branch}/state/") or {}
        for pin in state.get("pinned_facts") or []:
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
