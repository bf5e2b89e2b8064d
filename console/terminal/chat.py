"""The terminal chat loop: lines read one by one, a message sent and its answer streamed
(`streaming.py`), a slash command run (`commands.py`), over the session opened in
`state.py`.

Plain lines in, plain lines out (stdin/stdout), so it works in any terminal, over ssh, in a
pipe and under a test's subprocess. It needs only the standard library: the requests go
through `client.py`, the streams through `sse.py`.

`manage.py lcm_chat` wraps `main()`; the slash commands are listed by `/help`.
"""

from __future__ import annotations

import contextlib
import http.client
import sys
from collections.abc import Iterator
from typing import TextIO

from console.terminal.client import ApiClient, ApiError
from console.terminal.commands import run_command
from console.terminal.state import Chat
from console.terminal.streaming import TurnStream


def run(chat: Chat, lines) -> int:
    chat.show_header()
    chat.say("type a message, or /help")
    for raw in lines:
        line = raw.strip()
        if not line:
            continue
        try:
            if line.startswith("/"):
                if not run_command(chat, line):
                    break
            else:
                TurnStream(chat).send(line)
        except ApiError as error:
            chat.say(f"error: {error.code}: {error.message}")
        except (OSError, http.client.HTTPException) as error:
            chat.say(f"connection error: {error}")
    return 0


def main(
    *,
    url: str,
    token: str,
    session: str | None,
    title: str = "",
    model: str = "",
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
) -> int:
    out = stdout or sys.stdout
    chat = Chat(api=ApiClient(url, token), out=out, model=model)
    try:
        chat.open(session, title=title)
    except ApiError as error:
        out.write(f"error: {error.code}: {error.message}\n")
        return 2
    except OSError as error:
        out.write(f"cannot reach {url}: {error}\n")
        return 2
    return run(chat, stdin or _input_lines())


def _input_lines() -> Iterator[str]:
    """Lines from the keyboard with line editing (readline) when stdin is a terminal."""
    if not sys.stdin.isatty():
        yield from sys.stdin
        return
    with contextlib.suppress(ImportError):
        import readline  # noqa: F401  (enables editing and history for input())
    while True:
        try:
            yield input("> ") + "\n"
        except EOFError:
            return
