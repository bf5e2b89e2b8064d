"""Server-Sent Events frames, written in one place: the turn streams (turns/), the drop-in
OpenAI and Anthropic wires (dropin/) all go through these.

A frame is its optional `id:` and `event:` lines, one `data:` line and a blank line. The
callers serialize their own data (each wire keeps its JSON spelling, byte for byte); it is
one line of text, as JSON always is.
"""

from __future__ import annotations


def sse_frame(data: str, *, event: str | None = None, event_id: int | None = None) -> bytes:
    """One event: `id: {event_id}` and `event: {event}` when given, then `data: {data}`."""
    lines = []
    if event_id is not None:
        lines.append(f"id: {event_id}")
    if event is not None:
        lines.append(f"event: {event}")
    lines.append(f"data: {data}")
    return ("\n".join(lines) + "\n\n").encode()


def sse_retry(milliseconds: int) -> bytes:
    """The client's reconnection delay (`retry:`)."""
    return f"retry: {milliseconds}\n\n".encode()


def sse_comment(text: str) -> bytes:
    """A comment line (`: text`), which clients ignore: a keep-alive."""
    return f": {text}\n\n".encode()
