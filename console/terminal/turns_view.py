"""Commands that read the branch's turns: `/history`, `/pending`, `/commit`, `/context`."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from console.terminal.client import rows, segment

if TYPE_CHECKING:
    from console.terminal.state import Chat


def branch_turns(chat: Chat) -> list[dict]:
    """The branch's whole visible history, oldest first (following the cursor pages)."""
    query = {"branch_id": chat.header.branch, "limit": 1000}
    path = f"sessions/{segment(chat.session_id)}/turns/?" + urlencode(query)
    page = chat.api.request("GET", path)
    turns = rows(page)
    while isinstance(page, dict) and page.get("next"):
        page = chat.api.request("GET", chat.api.relative(page["next"]))
        turns.extend(rows(page))
    return turns


def resolve_turn(chat: Chat, ref: str | None) -> dict | None:
    """The turn named by its id or seq (`3` or `#3`); the newest when `ref` is empty."""
    turns = branch_turns(chat)
    if not turns:
        return None
    if not ref:
        return turns[-1]
    for t in turns:
        if t["id"] == ref or str(t["turn_seq"]) == ref.lstrip("#"):
            return t
    return None


def history(chat: Chat, args, rest) -> None:
    limit = int(args[0]) if args and args[0].isdigit() else 10
    turns = branch_turns(chat)[-limit:]
    if not turns:
        chat.say("no turns on this branch yet")
    for t in turns:
        user = (t.get("user_message") or {}).get("rendered_text", "")
        final = t.get("final_assistant_message") or {}
        label = " (incomplete)" if final.get("incomplete") else ""
        chat.say(f"#{t['turn_seq']} [{t['phase']}] {t.get('primary_model', '')}  {t['id']}")
        chat.say(f"  you: {user}")
        chat.say(f"  assistant{label}: {final.get('rendered_text', '')}")
        for step in t.get("steps", []):
            _show_step(chat, t, step)


def _show_step(chat: Chat, turn: dict, step: dict) -> None:
    outcome = step.get("outcome") or {}
    chat.say(
        f"  step {step.get('step_index')}: {outcome.get('status', '?')} "
        f"{step.get('model_id', '')} {step.get('stream_durable_bytes', 0)}/"
        f"{step.get('stream_displayed_bytes', 0)} B"
    )
    if turn.get("tools_mode") == "disabled":
        return  # no tool calls to show; spare the request
    detail = chat.api.request("GET", f"steps/{segment(step['id'])}/")
    for item in detail.get("normalized_items") or []:
        if item.get("kind") == "tool_call":
            chat.say(f"    tool call {item.get('name')} {json.dumps(item.get('arguments'))}")


def pending(chat: Chat, args, rest) -> None:
    waiting = [
        t
        for t in branch_turns(chat)
        if t.get("pending") and t.get("branch_id") == chat.header.branch
    ]
    if not waiting:
        chat.say("nothing pending: the head state covers every answered turn")
    for t in waiting:
        user = (t.get("user_message") or {}).get("rendered_text", "")
        chat.say(f"  #{t['turn_seq']} [{t['phase']}] {user[:100]}")


def commit(chat: Chat, args, rest) -> None:
    chat.api.request("POST", f"branches/{segment(chat.header.branch)}/commit/", {})
    chat.refresh()
    chat.say("committed")
    chat.show_header()


def context(chat: Chat, args, rest) -> None:
    turn = resolve_turn(chat, args[0] if args else None)
    if turn is None:
        chat.say("no turn to show")
        return
    data = chat.api.request("GET", f"turns/{segment(turn['id'])}/context/")
    seen = data.get("context", data) or {}
    chat.say(f"what the model saw for turn #{turn['turn_seq']}:")
    sections = seen.get("sections_tokens") or {}
    chat.say("  tokens: " + ", ".join(f"{k} {v}" for k, v in sections.items()))
    for name in ("system", "state_summary"):
        if seen.get(name):
            chat.say(f"  {name}: {' '.join(str(seen[name]).split())[:300]}")
    for pin in seen.get("pinned_facts") or []:
        chat.say(f"  pinned: {pin.get('text', pin) if isinstance(pin, dict) else pin}")
    if seen.get("summaries"):
        chat.say(f"  summaries: {len(seen['summaries'])} (untrusted, quoted)")
    for message in seen.get("history") or []:
        chat.say(f"  history {message.get('role')}: {message.get('rendered_text', '')[:200]}")
    if "stable_messages" in seen:
        chat.say(
            f"  stable prefix: system, pins, summaries and {seen['stable_messages']} "
            "messages (cacheable); the rest changes every turn"
        )
    for message in seen.get("pending") or []:
        chat.say(f"  pending {message.get('role')}: {message.get('rendered_text', '')[:200]}")
    for item in seen.get("retrieved") or []:
        score = item.get("score")
        sim = f" sim {score:.3f}" if isinstance(score, (int, float)) else ""
        text = " ".join(str(item.get("text", "")).split())
        chat.say(f"  retrieved {item.get('chunk_id') or item.get('id')}{sim}: {text[:200]}")
    user = seen.get("user") or {}
    chat.say(f"  user: {user.get('rendered_text', '') if isinstance(user, dict) else user}")
    for step in seen.get("shrink_steps") or []:
        chat.say(f"  shrink: {step}")


COMMANDS = {"history": history, "pending": pending, "commit": commit, "context": context}
