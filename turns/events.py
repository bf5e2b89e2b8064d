"""The turn's event log: what a client receives as Server-Sent Events, with resumable ids.

Each turn has one ordered list of events (`turn`, `context`, `step`, `delta`, `tool_call`,
`durable`, `done`, `error`), numbered 1, 2, 3... The runner publishes them; every
subscriber (the SSE view of the request that started the turn, a client that reconnected
with `Last-Event-ID`, another process) reads the same numbers, so a resumed stream has no
gap and no duplicate.

Two places hold the log:
- in memory, while the turn runs in this process (live subscribers wake at once);
- on disk, `{data_dir}/streams/turn-{turn_id}.events.jsonl`, each event handed to the OS
  as it is published and the file fsynced at the end, for subscribers in other processes,
  for resumes after the turn ended, and after a crash (the reconciler appends the closing
  event; the step journals, not this log, are the durable record of the output).
  Once the terminal event is written the file is published to the `stream_journals`
  storage (turns/journal_store.py), where a resume from any host reads it.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

from core import crypto
from core.sse import sse_frame
from turns import journal_store
from turns.journal import streams_dir

TERMINAL_EVENTS = frozenset({"done", "error"})
# A finished turn's in-memory log stays this long for late subscribers, then disk serves.
_KEEP_SECONDS = 30.0


@dataclass(frozen=True)
class TurnEvent:
    id: int
    event: str
    data: dict

    def as_sse(self) -> bytes:
        body = json.dumps(self.data, ensure_ascii=False, separators=(",", ":"))
        return sse_frame(body, event=self.event, event_id=self.id)

    def as_json(self) -> str:
        return json.dumps(
            {"id": self.id, "event": self.event, "data": self.data},
            ensure_ascii=False,
            separators=(",", ":"),
        )


def events_path(turn_id: str) -> Path:
    return streams_dir() / f"turn-{turn_id}.events.jsonl"


class TurnChannel:
    """The live event log of one turn in this process."""

    def __init__(self, turn_id: str) -> None:
        self.turn_id = turn_id
        self.events: list[TurnEvent] = []
        self.finished_at: float | None = None
        self._cond = threading.Condition()
        path = events_path(turn_id)
        self._next_id = _last_id_on_disk(path) + 1  # a turn resumed by another runner
        self._file = open(path, "ab")  # noqa: SIM115  (closed when the turn ends)

    @property
    def finished(self) -> bool:
        return self.finished_at is not None

    def publish(self, event: str, data: dict) -> TurnEvent:
        with self._cond:
            if self.finished:
                raise ValueError(f"turn {self.turn_id}: event log already closed")
            item = TurnEvent(self._next_id, event, data)
            self._next_id += 1
            self.events.append(item)
            # Handed to the OS at once (no fsync: the step journal is the durable record),
            # so a subscriber in another process sees it as soon as we do.
            self._file.write(crypto.encrypt_line(item.as_json().encode()) + b"\n")
            self._file.flush()
            terminal = event in TERMINAL_EVENTS
            if terminal:
                os.fsync(self._file.fileno())
                self._file.close()
                self.finished_at = time.monotonic()
            self._cond.notify_all()
        if terminal:  # live subscribers here read memory; the others, the published log
            journal_store.publish(events_path(self.turn_id))
        return item

    def after(self, last_id: int) -> list[TurnEvent]:
        with self._cond:
            return [e for e in self.events if e.id > last_id]

    def wait(self, last_id: int, timeout: float) -> list[TurnEvent]:
        with self._cond:
            if not self.finished and (not self.events or self.events[-1].id <= last_id):
                self._cond.wait(timeout)
            return [e for e in self.events if e.id > last_id]


_channels: dict[str, TurnChannel] = {}
_channels_lock = threading.Lock()


def open_channel(turn_id: str) -> TurnChannel:
    with _channels_lock:
        _forget_old()
        channel = _channels.get(turn_id)
        if channel is None or channel.finished:
            channel = TurnChannel(turn_id)
            _channels[turn_id] = channel
        return channel


def live_channel(turn_id: str) -> TurnChannel | None:
    with _channels_lock:
        return _channels.get(turn_id)


def _forget_old() -> None:
    now = time.monotonic()
    for key in [
        k for k, c in _channels.items() if c.finished and now - c.finished_at > _KEEP_SECONDS
    ]:
        del _channels[key]


def read_log(turn_id: str, after: int = 0) -> list[TurnEvent]:
    """The events on disk after `after` (a torn last line is skipped)."""
    try:
        data = journal_store.read_bytes(events_path(turn_id))
    except FileNotFoundError:
        return []
    events = []
    for raw in data.split(b"\n"):
        if not raw.strip():
            continue
        try:
            item = json.loads(crypto.decrypt_line(raw))
        except ValueError:
            continue
        if item["id"] > after:
            events.append(TurnEvent(item["id"], item["event"], item["data"]))
    return events


def _last_id_on_disk(path: Path) -> int:
    try:
        data = journal_store.read_bytes(path)
    except FileNotFoundError:
        return 0
    last = 0
    for raw in data.split(b"\n"):
        if raw.strip():
            try:
                last = max(last, int(json.loads(crypto.decrypt_line(raw))["id"]))
            except (ValueError, KeyError, TypeError):
                continue
    return last


def append_terminal(turn_id: str, event: str, data: dict) -> TurnEvent | None:
    """Close a turn's log from outside its runner (the reconciler after a crash).
    A log that is already closed is left alone, so a retried recovery writes nothing."""
    existing = read_log(turn_id)
    if any(e.event in TERMINAL_EVENTS for e in existing):
        return None
    item = TurnEvent((existing[-1].id if existing else 0) + 1, event, data)
    with open(events_path(turn_id), "ab") as handle:
        handle.write(crypto.encrypt_line(item.as_json().encode()) + b"\n")
        handle.flush()
        os.fsync(handle.fileno())
    journal_store.publish(events_path(turn_id))
    return item


# Subscribing ------------------------------------------------------------------------------


def follow(turn_id: str, after: int, *, is_finished, poll: float = 0.2) -> Iterator[TurnEvent]:
    """Every event after `after` until the terminal one (blocking; for sync clients).

    `is_finished()` tells whether the turn is over in the database, so a subscriber of a
    turn whose process died (no terminal event yet) stops once the reconciler closed it.
    """
    last = after
    while True:
        channel = live_channel(turn_id)
        batch = channel.wait(last, poll) if channel is not None else read_log(turn_id, last)
        for item in batch:
            last = item.id
            yield item
            if item.event in TERMINAL_EVENTS:
                return
        if channel is None and not batch:
            if is_finished():
                for item in read_log(turn_id, last):
                    yield item
                return
            time.sleep(poll)


async def afollow(
    turn_id: str, after: int, *, is_finished, heartbeat: float = 15.0
) -> AsyncIterator[TurnEvent | None]:
    """Async `follow`: yields events, and None every `heartbeat` seconds of silence."""
    last = after
    delay = 0.005
    quiet_since = time.monotonic()
    while True:
        channel = live_channel(turn_id)
        batch = channel.after(last) if channel is not None else read_log(turn_id, last)
        if batch:
            delay = 0.005
            quiet_since = time.monotonic()
            for item in batch:
                last = item.id
                yield item
                if item.event in TERMINAL_EVENTS:
                    return
            continue
        if channel is None and await is_finished():
            for item in read_log(turn_id, last):
                yield item
            return
        if time.monotonic() - quiet_since >= heartbeat:
            quiet_since = time.monotonic()
            yield None
        await asyncio.sleep(delay)
        # Live channels are cheap to poll; disk logs (another process) less often.
        delay = min(delay * 2, 0.05 if channel is not None else 0.25)
