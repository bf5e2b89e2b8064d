"""The slash commands: parsing a command line, running its handler, `/help`.

Each handler is `(chat, args, rest)`: `args` the words after the command, `rest` the text
after it as typed. They live by subject: here the session's own (model, tools, status),
`turns_view.py` (history, pending, commit, context), `branches.py` (fork, rollback,
branches, switch) and `memory.py` (chunks, retrieve, attach, pins).
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from console.terminal import branches, memory, turns_view
from console.terminal.client import ApiError, rows

if TYPE_CHECKING:
    from console.terminal.state import Chat

TOOLS_MODES = ("disabled", "parse_only", "enabled")

HELP = """Commands (anything else is sent as a message):
  /model [NAME]          list models, or use NAME for the next turns
  /tools [MODE]          show or set the tools mode: disabled, parse_only, enabled
  /history [N]           the last N turns (default 10) with their steps and tool calls
  /chunks [QUERY]        browse or search this branch's memory chunks
  /retrieve QUERY        search memory with similarity scores (then /attach ID)
  /attach ID [ID...]     attach chunks to the next turn (/attach - clears)
  /fork [TURN]           fork a new branch after turn TURN (seq or id; default the newest)
  /rollback STATE_SEQ    a new branch whose head is that state of this branch
  /branches              the branch tree
  /switch BRANCH         make BRANCH (id or label) the active branch
  /pin TEXT              pin a fact (always in the context)
  /unpin ID              remove a pinned fact (/pins lists them)
  /pins                  list pinned facts
  /pending               turns answered but not yet summarized into the state
  /commit                commit pending turns now
  /context [TURN]        what the model saw for TURN (default the newest)
  /status                print the header
  /help                  this help
  /quit                  leave (also Ctrl-D)"""


def run_command(chat: Chat, line: str) -> bool:
    """Run one slash command; False means quit."""
    try:
        words = shlex.split(line[1:])
    except ValueError:
        words = line[1:].split()
    if not words:
        return True
    name, args = words[0].lower(), words[1:]
    rest = line[1:].strip()[len(words[0]) :].strip()
    if name in ("quit", "exit", "q"):
        return False
    handler = COMMANDS.get(name)
    if handler is None:
        chat.say(f"unknown command /{name}; /help lists them")
        return True
    try:
        handler(chat, args, rest)
    except ApiError as error:
        chat.say(f"error: {error.code}: {error.message}")
    return True


def help_(chat: Chat, args, rest) -> None:
    chat.say(HELP)


def status(chat: Chat, args, rest) -> None:
    chat.refresh()
    chat.show_header()


def model(chat: Chat, args, rest) -> None:
    models = rows(chat.api.request("GET", "models/"))
    names = [m["name"] for m in models]
    if not args:
        for m in models:
            mark = "*" if m["name"] == chat.model else " "
            key = "" if m.get("available", True) else f"  (no key: set {m.get('api_key_env')})"
            chat.say(f" {mark} {m['name']:<12} {m['provider']:<10} {m.get('model_id', '')}{key}")
        return
    if args[0] not in names:
        chat.say(f"unknown model {args[0]!r}; configured: {', '.join(names)}")
        return
    chat.model = args[0]
    chat.say(f"model: {chat.model}")


def tools(chat: Chat, args, rest) -> None:
    if args and args[0] not in TOOLS_MODES:
        chat.say(f"tools mode must be one of {', '.join(TOOLS_MODES)}")
        return
    if args:
        chat.tools_mode = args[0]
    chat.say(f"tools: {chat.tools_mode or 'the session default'}")


COMMANDS = {
    "help": help_,
    "status": status,
    "model": model,
    "tools": tools,
    **turns_view.COMMANDS,
    **branches.COMMANDS,
    **memory.COMMANDS,
}
