"""Per-message work remembered across requests (process-local, bounded).

An agent resends its whole history with every request: at 1,000 messages, parsing each
message into our blocks, hashing the chain and estimating the tokens again cost ~55 ms a
request for two new messages (docs/benchmarks.md, "Server time before the first byte").
A message the process has already seen is recognised by its JSON value: `key` is the
decoded message marshalled (format 2, without references: only equal values, of equal
types, key order included, give equal bytes, since unmarshalling them gives the value
back; `1`, `1.0` and `true` differ). Marshalling 1,000 messages takes ~1 ms, four times
less than `repr`. What the message gave then is reused:

- `blocks`: the wire's parse of the message (our blocks, never mutated by their readers);
- `pieces`: its share of the token estimate (its visible text, the JSON of its tool calls,
  results and images), joined per request exactly as `services.request_tokens` joins them;
- `step`: the chain hash after it, given the chain hash before it (the identity of a
  message in a thread depends on everything before it, so the previous head is part of the
  key: a changed earlier message changes every later step and misses here).

Nothing here decides anything: a miss computes what a hit would have returned (the tests
compare both), so a cold process, an evicted entry or another worker process only costs
time. Entries are kept least recently used first, within `MAX_BYTES` of marshalled
messages (the size of the histories being served, not of one request).
"""

from __future__ import annotations

import marshal
import threading
from collections import OrderedDict

# Marshalled messages kept (as keys, beside their parse): a few dozen long agent sessions.
MAX_BYTES = 64_000_000
MAX_STEPS = 500_000

Key = tuple[str, bytes]  # (wire, the decoded message marshalled)
_lock = threading.Lock()
_entries: OrderedDict[Key, Entry] = OrderedDict()
_steps: OrderedDict[tuple[str, Key], str] = OrderedDict()
_bytes = 0


class Entry:
    """What one message's JSON value gave when it was last parsed."""

    __slots__ = ("name", "blocks", "pieces", "size")

    def __init__(self, name: Key, blocks: list[dict], size: int) -> None:
        self.name = name
        self.blocks = blocks
        self.pieces: tuple[str, str | None] | None = None  # set by services on first use
        self.size = size


def key(wire: str, message) -> tuple[Key | None, int]:
    """(the key naming a decoded JSON message on `wire`, its size in bytes); (None, 0) for
    a value marshal cannot write (nested beyond its depth): such a message is not kept."""
    try:
        data = marshal.dumps(message, 2)
    except ValueError:
        return None, 0
    return (wire, data), len(data)


def entry(name: Key) -> Entry | None:
    with _lock:
        found = _entries.get(name)
        if found is not None:
            _entries.move_to_end(name)
        return found


def remember(name: Key, blocks: list[dict], size: int) -> Entry:
    global _bytes
    made = Entry(name, blocks, size)
    with _lock:
        if name not in _entries:
            _bytes += size
        _entries[name] = made
        while _bytes > MAX_BYTES and _entries:
            _, dropped = _entries.popitem(last=False)
            _bytes -= dropped.size
    return made


def step(head: str, name: Key) -> str | None:
    with _lock:
        after = _steps.get((head, name))
        if after is not None:
            _steps.move_to_end((head, name))
        return after


def remember_step(head: str, name: Key, after: str) -> None:
    with _lock:
        _steps[(head, name)] = after
        if len(_steps) > MAX_STEPS:
            _steps.popitem(last=False)


def clear() -> None:
    """Forget everything (tests; a cold process)."""
    global _bytes
    with _lock:
        _entries.clear()
        _steps.clear()
        _bytes = 0
