"""Commands on the session's branches: `/fork`, `/rollback`, `/branches`, `/switch`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from console.terminal.client import segment
from console.terminal.turns_view import resolve_turn

if TYPE_CHECKING:
    from console.terminal.state import Chat


def fork(chat: Chat, args, rest) -> None:
    turn = resolve_turn(chat, args[0] if args else None)
    if args and turn is None:
        chat.say(f"no turn {args[0]} on this branch")
        return
    body = {"turn_id": turn["id"]} if turn else {}
    branch = chat.api.request("POST", f"branches/{segment(chat.header.branch)}/fork/", body)
    activate(chat, branch["id"])
    chat.say(f"forked: branch {branch.get('label') or branch['id']} is now active")
    chat.show_header()


def rollback(chat: Chat, args, rest) -> None:
    if not args or not args[0].isdigit():
        chat.say("usage: /rollback STATE_SEQ")
        return
    branch = chat.api.request(
        "POST",
        f"branches/{segment(chat.header.branch)}/rollback/",
        {"state_seq": int(args[0])},
    )
    activate(chat, branch["id"])
    chat.say(f"rolled back: branch {branch.get('label') or branch['id']} is now active")
    chat.show_header()


def activate(chat: Chat, branch_id: str) -> None:
    chat.api.request(
        "POST",
        f"sessions/{segment(chat.session_id)}/activate-branch/",
        {"branch_id": branch_id},
    )
    chat.refresh()


def _branches(chat: Chat) -> list[dict]:
    return chat.api.request("GET", f"sessions/{segment(chat.session_id)}/").get("branches", [])


def tree(chat: Chat, args, rest) -> None:
    branches = _branches(chat)
    children: dict = {}
    for b in branches:
        children.setdefault(b.get("parent_id"), []).append(b)
    known = {b["id"] for b in branches}

    def walk(b: dict, depth: int) -> None:
        mark = "*" if b["id"] == chat.header.branch else " "
        fork_seq = b.get("fork_turn_seq")
        where = f" forked after #{fork_seq}" if fork_seq is not None else ""
        chat.say(f" {mark} {'  ' * depth}{b.get('label') or b['id']}  {b['id']}{where}")
        for child in children.get(b["id"], []):
            walk(child, depth + 1)

    for root in [b for b in branches if b.get("parent_id") not in known]:
        walk(root, 0)


def switch(chat: Chat, args, rest) -> None:
    if not rest:
        chat.say("usage: /switch BRANCH (id or label)")
        return
    match = [b for b in _branches(chat) if rest in (b["id"], b.get("label"))]
    if not match:
        chat.say(f"no branch {rest!r}; /branches lists them")
        return
    activate(chat, match[0]["id"])
    chat.show_header()


COMMANDS = {"fork": fork, "rollback": rollback, "branches": tree, "switch": switch}
