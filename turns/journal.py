"""Stream journals (SRD 13): one append-only JSON-lines file per streaming provider step.

    {data_dir}/streams/{step_id}.jsonl
    {"ts": 1732350000.123, "provider": "anthropic", "event_type": "content_block_delta",
     "seq": 7, "payload": {...}}

The runner writes every wire event of a step here while it streams. Wire events go to an
in-memory buffer, handed to the OS at least every `flush_ms` (250 ms) or `flush_bytes`
(8 KB); an event that carries output for the client (text, tool input) is handed over at
once, before the client sees it, so a process killed mid-stream never showed more than
its journal holds. The file is fsynced at least every `fsync_ms` (2 s) and at close. A
single flusher thread enforces the time limits even while the provider is silent.

Byte accounting: `displayed` counts the UTF-8 bytes of output text and tool input that
were handed to clients; `durable` is the value of `displayed` at the last fsync. While
`displayed > durable` the client shows the output as buffered.

The first line records who writes the journal (host and pid), so the reconciler can tell
a journal whose writer died from one another live process is still writing.
`recover_step()` rebuilds the partial output of a step from its journal after a crash.

A closed journal is published to the `stream_journals` storage (turns/journal_store.py:
a shared object store when one is configured); readers find it there once the local file
is gone.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from core import crypto
from providers.config import engine_config
from turns import journal_store

logger = logging.getLogger(__name__)

OPEN_EVENT = "lcm.journal_open"
CLOSE_EVENT = "lcm.journal_close"
# A journal untouched for this long whose writer is not a live local process is orphaned.
STALE_SECONDS = 15.0


@dataclass(frozen=True)
class FlushPolicy:
    flush_ms: int = 250
    flush_bytes: int = 8192
    fsync_ms: int = 2000


def streams_dir() -> Path:
    path = Path(settings.DATA_DIR) / "streams"
    path.mkdir(parents=True, exist_ok=True)
    return path


def journal_path(step_id: str) -> Path:
    return streams_dir() / f"{step_id}.jsonl"


def default_policy() -> FlushPolicy:
    """The `[stream]` table of the engine config (SRD 18), defaults 250 ms / 8 KB / 2 s."""
    stream = engine_config().stream
    return FlushPolicy(
        flush_ms=stream.flush_ms, flush_bytes=stream.flush_bytes, fsync_ms=stream.fsync_ms
    )


class StreamJournal:
    """Append-only writer of one step's journal; thread-safe (the runner and the flusher)."""

    def __init__(
        self,
        *,
        step_id: str,
        provider: str,
        path: Path | None = None,
        policy: FlushPolicy | None = None,
        on_durable=None,
    ) -> None:
        self.step_id = step_id
        self.provider = provider
        self.path = path or journal_path(step_id)
        self.policy = policy or default_policy()
        self._on_durable = on_durable  # called (displayed, durable) after each fsync
        self._lock = threading.Lock()
        self._file = open(self.path, "ab")  # noqa: SIM115  (closed in close())
        self._buffer = bytearray()
        self._seq = 0
        self._displayed = 0
        self._written_displayed = 0  # `displayed` as of the last hand-off to the OS
        self._durable = 0
        now = time.monotonic()
        self._last_flush = now
        self._last_fsync = now
        self._dirty_since_fsync = False
        self.closed = False
        self.write(OPEN_EVENT, {"host": socket.gethostname(), "pid": os.getpid()})
        with self._lock:  # the writer's identity is on disk before any output
            self._flush_locked()
        _FLUSHER.register(self)

    @property
    def displayed(self) -> int:
        return self._displayed

    @property
    def durable(self) -> int:
        return self._durable

    def write(self, event_type: str, payload: dict, *, shown: str = "") -> int:
        """Append one event; `shown` is the text this event displays to the client."""
        with self._lock:
            if self.closed:
                raise ValueError(f"journal {self.step_id} is closed")
            self._seq += 1
            line = json.dumps(
                {
                    "ts": round(time.time(), 6),
                    "provider": self.provider,
                    "event_type": event_type,
                    "seq": self._seq,
                    "payload": payload,
                },
                ensure_ascii=False,
                separators=(",", ":"),
            )
            self._buffer += crypto.encrypt_line(line.encode()) + b"\n"  # clear without a key
            self._displayed += len(shown.encode())
            # Output about to be shown goes to the OS at once, so a killed process never
            # showed more than its journal holds (fsync still follows the policy).
            if shown or len(self._buffer) >= self.policy.flush_bytes:
                self._flush_locked()
            return self._seq

    def tick(self) -> None:
        """Apply the time limits (called by the flusher thread and after each write)."""
        fsynced = None
        with self._lock:
            if self.closed:
                return
            now = time.monotonic()
            if self._buffer and (now - self._last_flush) * 1000 >= self.policy.flush_ms:
                self._flush_locked()
            if self._dirty_since_fsync and (now - self._last_fsync) * 1000 >= self.policy.fsync_ms:
                fsynced = self._fsync_locked()
        if fsynced is not None:
            self._notify(*fsynced)

    def sync(self) -> tuple[int, int]:
        """Flush and fsync now; returns (displayed, durable)."""
        with self._lock:
            if self.closed:
                return self._displayed, self._durable
            self._flush_locked()
            result = self._fsync_locked()
        self._notify(*result)
        return result

    def close(self) -> tuple[int, int]:
        """Write the close marker, fsync, close; returns (displayed, durable)."""
        with self._lock:
            if self.closed:
                return self._displayed, self._durable
        self.write(CLOSE_EVENT, {"displayed_bytes": self._displayed})
        with self._lock:
            self._flush_locked()
            result = self._fsync_locked()
            self._file.close()
            self.closed = True
        _FLUSHER.unregister(self)
        journal_store.publish(self.path)  # finished: to the shared storage, if there is one
        self._notify(*result)
        return result

    def abandon(self) -> None:
        """Close the file without the close marker (tests simulate a crash with it)."""
        with self._lock:
            if not self.closed:
                self._flush_locked()
                self._file.close()
                self.closed = True
        _FLUSHER.unregister(self)

    def _flush_locked(self) -> None:
        if self._buffer:
            self._file.write(self._buffer)
            self._buffer.clear()
            self._file.flush()
            self._dirty_since_fsync = True
        self._written_displayed = self._displayed
        self._last_flush = time.monotonic()

    def _fsync_locked(self) -> tuple[int, int]:
        if self._dirty_since_fsync:
            os.fsync(self._file.fileno())
            self._dirty_since_fsync = False
        self._durable = self._written_displayed
        self._last_fsync = time.monotonic()
        return self._displayed, self._durable

    def _notify(self, displayed: int, durable: int) -> None:
        if self._on_durable is not None:
            try:
                self._on_durable(displayed, durable)
            except Exception:
                logger.exception("durable callback failed for step %s", self.step_id)


class _Flusher:
    """One daemon thread that ticks every open journal every 50 ms."""

    interval = 0.05

    def __init__(self) -> None:
        self._journals: weakref.WeakSet[StreamJournal] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def register(self, journal: StreamJournal) -> None:
        with self._lock:
            self._journals.add(journal)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="lcm-journal-flusher", daemon=True
                )
                self._thread.start()

    def unregister(self, journal: StreamJournal) -> None:
        with self._lock:
            self._journals.discard(journal)

    def _run(self) -> None:
        while True:
            time.sleep(self.interval)
            with self._lock:
                journals = list(self._journals)
            for journal in journals:
                try:
                    journal.tick()
                except Exception:
                    logger.exception("journal flush failed for step %s", journal.step_id)


_FLUSHER = _Flusher()


# Reading and recovery ---------------------------------------------------------------------


def read_entries(path: Path) -> list[dict]:
    """Every complete line of a journal; a torn last line (a crash mid-write) is skipped."""
    entries = []
    try:
        data = journal_store.read_bytes(path)  # the live local file, else the published one
    except FileNotFoundError:
        return entries
    for raw in data.split(b"\n"):
        if not raw.strip():
            continue
        try:
            entries.append(json.loads(crypto.decrypt_line(raw)))
        except ValueError:
            continue  # the torn tail of an interrupted write
    return entries


@dataclass
class RecoveredStream:
    """What a journal says about a step whose end was never recorded in the database."""

    text: str = ""  # the output text shown before the stream stopped
    blocks: list[dict] = field(default_factory=list)  # partial assistant blocks (our shape)
    tool_calls: list[dict] = field(default_factory=list)
    ended: bool = False  # the journal has its close marker
    last_event_type: str | None = None
    error: dict | None = None  # a provider error event seen in the stream, if any
    writer_alive: bool = False  # the writing process still runs (do not touch the step)
    displayed_bytes: int = 0
    entries: int = 0


def writer_alive(path: Path, entries: list[dict] | None = None) -> bool:
    """True when the journal's writer may still be streaming: its pid is alive on this
    host, or (another host) the file was touched within STALE_SECONDS."""
    entries = read_entries(path) if entries is None else entries
    opened = next((e for e in entries if e.get("event_type") == OPEN_EVENT), None)
    if any(e.get("event_type") == CLOSE_EVENT for e in entries):
        return False
    if opened is None:
        return False
    payload = opened.get("payload") or {}
    if payload.get("host") == socket.gethostname():
        pid = payload.get("pid")
        if pid == os.getpid():
            return _step_open_here(path)
        return _pid_alive(pid)
    try:
        return time.time() - path.stat().st_mtime < STALE_SECONDS
    except FileNotFoundError:  # published (finished) or never written here
        return False


def _pid_alive(pid) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _step_open_here(path: Path) -> bool:
    with _FLUSHER._lock:
        return any(j.path == path and not j.closed for j in _FLUSHER._journals)


def recover_step(step) -> RecoveredStream:
    """Rebuild a step's partial output from its journal (any provider's wire events)."""
    path = Path(step.stream_path) if step.stream_path else journal_path(step.id)
    entries = read_entries(path)
    recovered = RecoveredStream(entries=len(entries))
    recovered.writer_alive = writer_alive(path, entries)
    texts: dict[int, list[str]] = {}
    tools: dict[int, dict] = {}
    tool_json: dict[int, list[str]] = {}
    for entry in entries:
        kind = entry.get("event_type")
        payload = entry.get("payload") or {}
        recovered.last_event_type = kind
        if kind == CLOSE_EVENT:
            recovered.ended = True
        elif kind == "lcm.text":  # the runner's normalized delta (provider-neutral)
            texts.setdefault(int(payload.get("index", 0)), []).append(payload.get("text", ""))
        elif kind == "lcm.tool_call":
            index = int(payload.get("index", 0))
            tools[index] = {
                "type": "tool_use",
                "id": payload.get("call_id", ""),
                "name": payload.get("name", ""),
                "input": {},
            }
        elif kind == "lcm.tool_input":
            tool_json.setdefault(int(payload.get("index", 0)), []).append(
                payload.get("partial_json", "")
            )
        elif kind in ("error", "response.failed", "lcm.error"):
            recovered.error = payload
    for index in sorted(set(texts) | set(tools)):
        if index in texts:
            recovered.blocks.append(
                {"type": "text", "text": "".join(texts[index]), "annotations": []}
            )
        if index in tools:
            block = tools[index]
            raw = "".join(tool_json.get(index, []))
            try:
                block["input"] = json.loads(raw) if raw else {}
            except ValueError:
                block["input"] = {"_partial_json": raw}
            recovered.blocks.append(block)
            recovered.tool_calls.append(block)
    recovered.text = "".join(b["text"] for b in recovered.blocks if b["type"] == "text")
    recovered.displayed_bytes = len(recovered.text.encode())
    return recovered
