"""Commands on the branch's memory: `/chunks`, `/retrieve`, `/attach`, `/pin`, `/pins`,
`/unpin`."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlencode

from console.terminal.client import rows, segment

if TYPE_CHECKING:
    from console.terminal.state import Chat


def _chunk_lines(chat: Chat, found: list[dict]) -> None:
    if not found:
        chat.say("nothing found")
    for row in found:
        chunk = row.get("chunk", row)
        score = row.get("score", row.get("similarity"))
        text = " ".join(str(chunk.get("text", "")).split())
        sim = f" sim {float(score):.3f}" if isinstance(score, (int, float)) else ""
        chat.say(f"  {chunk.get('id')}{sim}  {text[:160]}")


def chunks(chat: Chat, args, rest) -> None:
    path = f"branches/{segment(chat.header.branch)}/chunks/"
    if rest:
        path += "?" + urlencode({"q": rest})
    _chunk_lines(chat, rows(chat.api.request("GET", path)))


def retrieve(chat: Chat, args, rest) -> None:
    if not rest:
        chat.say("usage: /retrieve QUERY")
        return
    data = chat.api.request(
        "POST", f"branches/{segment(chat.header.branch)}/retrieve/", {"query": rest}
    )
    _chunk_lines(chat, rows(data))
    chat.say("attach one to the next turn with /attach ID")


def attach(chat: Chat, args, rest) -> None:
    if args == ["-"]:
        chat.attached = []
    else:
        chat.attached.extend(a for a in args if a not in chat.attached)
    chat.say(f"attached to the next turn: {', '.join(chat.attached) or 'nothing'}")


def pin(chat: Chat, args, rest) -> None:
    if not rest:
        chat.say("usage: /pin TEXT")
        return
    data = chat.api.request("POST", f"branches/{segment(chat.header.branch)}/pins/", {"text": rest})
    pinned = data.get("pin", data)
    chat.say(f"pinned {pinned.get('id', '')}: {pinned.get('text', rest)}")
    chat.refresh()
    chat.show_header()


def pins(chat: Chat, args, rest) -> None:
    state = chat.api.request("GET", f"branches/{segment(chat.header.branch)}/state/")
    found = state.get("pinned_facts", [])
    if not found:
        chat.say("no pinned facts")
    for fact in found:
        chat.say(f"  {fact['id']}  {fact['text']}")


def unpin(chat: Chat, args, rest) -> None:
    if not args:
        chat.say("usage: /unpin ID (/pins lists them)")
        return
    chat.api.request("DELETE", f"branches/{segment(chat.header.branch)}/pins/{segment(args[0])}/")
    chat.say(f"unpinned {args[0]}")
    chat.refresh()
    chat.show_header()


COMMANDS = {
    "chunks": chunks,
    "retrieve": retrieve,
    "attach": attach,
    "pin": pin,
    "pins": pins,
    "unpin": unpin,
}
