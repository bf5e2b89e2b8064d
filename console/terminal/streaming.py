"""Sending one message and showing its answer as it streams.

A dropped stream is resumed from the turn's event log with `Last-Event-ID`, skipping
nothing and repeating nothing (events are applied only once, by id).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from console.terminal.client import segment
from console.terminal.sse import SseEvent

if TYPE_CHECKING:
    from console.terminal.state import Chat

# A server restart takes seconds: keep trying for about a minute, backing off to 2 s.
RESUME_ATTEMPTS = 40
RESUME_DELAY_SECONDS = 0.3
RESUME_MAX_DELAY_SECONDS = 2.0


class TurnStream:
    """One turn's events applied to the chat: its header, its output, its resumes."""

    def __init__(self, chat: Chat):
        self.chat = chat
        self.turn: str | None = None
        self.last = 0  # the id of the last event applied
        self.ended = False
        self.open_line = False  # output written without its newline yet
        self.shown = ""  # the answer's text shown so far

    def send(self, text: str) -> None:
        chat = self.chat
        body: dict = {"content": text, "stream": True}
        if chat.model:
            body["model"] = chat.model
        if chat.tools_mode:
            body["tools_mode"] = chat.tools_mode
        if chat.attached:
            body["attach_chunk_ids"] = list(chat.attached)
        chat.header.streaming = True
        chat.header.durable = chat.header.displayed = 0
        try:
            path = f"sessions/{segment(chat.session_id)}/turns/"
            self.apply_all(chat.api.stream("POST", path, body))
            chat.attached = []
            self.resume()
        finally:
            chat.header.streaming = False
        self.end_line()
        chat.refresh()
        chat.show_header()

    def resume(self) -> None:
        """Read the turn's stream again after a drop, from the last event applied."""
        attempts, reported = 0, None
        while not self.ended and self.turn and attempts < RESUME_ATTEMPTS:
            attempts += 1
            if reported != self.last:  # once per drop, not per retry
                self.end_line()
                self.chat.say(f"(connection dropped; resuming after event {self.last})")
                reported = self.last
            time.sleep(min(RESUME_DELAY_SECONDS * attempts, RESUME_MAX_DELAY_SECONDS))
            path = f"turns/{segment(self.turn)}/stream/?" + urlencode({"after": self.last})
            before = self.last
            self.apply_all(self.chat.api.stream("GET", path, last_event_id=self.last))
            if self.last != before:
                attempts = 0  # it made progress: a fresh budget for the next drop
        if not self.ended:
            self.end_line()
            self.chat.say("(the stream was lost; /history shows the turn when it ends)")

    def end_line(self) -> None:
        if self.open_line:
            self.chat.out.write("\n")
            self.chat.out.flush()
            self.open_line = False

    def write(self, text: str) -> None:
        self.chat.out.write(text)
        self.chat.out.flush()
        self.open_line = True

    def apply_all(self, events: Iterator[SseEvent]) -> None:
        for event in events:
            if event.id is not None:
                if event.id <= self.last:
                    continue  # already applied before a resume
                self.last = event.id
            self.apply(event)
            if self.ended:
                return

    def apply(self, event: SseEvent) -> None:
        handler = _HANDLERS.get(event.event)
        if handler is not None:
            handler(self, event.data)

    def on_turn(self, data: dict) -> None:
        self.turn = self.turn or data.get("turn_id")
        self.chat.header.phase = data.get("phase", self.chat.header.phase)
        self.chat.show_header()

    def on_context(self, data: dict) -> None:
        self.chat.header.phase = "context_prepared"

    def on_step(self, data: dict) -> None:
        if data.get("status") == "streaming":
            self.chat.header.phase = "responding"
            self.chat.say("assistant:")

    def on_delta(self, data: dict) -> None:
        self.shown += data.get("text", "")
        self.write(data.get("text", ""))

    def on_tool_call(self, data: dict) -> None:
        self.end_line()
        self.chat.say(f"  [tool call: {data.get('name', '?')}]")

    def on_tool_result(self, data: dict) -> None:
        self.end_line()
        error = " (error)" if data.get("is_error") else ""
        self.chat.say(f"  [tool result: {data.get('name', '?')}{error}]")

    def on_durable(self, data: dict) -> None:
        self.chat.header.durable = int(data.get("durable", 0))
        self.chat.header.displayed = int(data.get("displayed", 0))

    def on_done(self, data: dict) -> None:
        self.ended = True
        self.chat.header.phase = data.get("phase", "response_finalized")

    def on_error(self, data: dict) -> None:
        self.ended = True
        partial = data.get("partial_text") or ""
        if partial.startswith(self.shown) and len(partial) > len(self.shown):
            # the journal kept more than reached this client before the drop
            self.chat.out.write(partial[len(self.shown) :])
            self.open_line = True
        self.end_line()
        self.chat.header.phase = data.get("phase", "failed")
        if data.get("incomplete"):
            self.chat.say(
                "(incomplete: the answer stopped part-way; the partial output above is kept)"
            )
        self.chat.say(f"error: {data.get('code', 'error')}: {data.get('message', '')}")


# An event's name -> what it does to the chat; other events are ignored.
_HANDLERS = {
    "turn": TurnStream.on_turn,
    "context": TurnStream.on_context,
    "step": TurnStream.on_step,
    "delta": TurnStream.on_delta,
    "tool_call": TurnStream.on_tool_call,
    "tool_result": TurnStream.on_tool_result,
    "durable": TurnStream.on_durable,
    "done": TurnStream.on_done,
    "error": TurnStream.on_error,
}
