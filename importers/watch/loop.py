"""The watcher: passes over the stores, each bringing in what changed since the stored
offsets, driven by file events (watchdog) or by polling.

A pass groups the changed files by unit (a session with its sub-agent files, OpenCode's
database or tree), delivers each unit once, then records the new offsets of its files.
A unit that cannot be delivered now (a file caught mid-write, a server down for good)
keeps its offsets and is tried again at the next pass.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from django.db import DatabaseError, close_old_connections

from importers.watch.changes import Change, detect
from importers.watch.local import Retry
from importers.watch.offsets import Offsets
from importers.watch.remote import RemoteError
from importers.watch.stores import APPEND, Store, Watched, classify, discover


@dataclass
class PassResult:
    files: int = 0
    units: int = 0
    messages: int = 0
    waiting: int = 0  # units left for the next pass


_REFUSED = object()


class Watcher:
    def __init__(self, stores: list[Store], sink, *, log: Callable[[str], None] = print):
        self.stores = stores
        self.sink = sink
        self.offsets = Offsets(sink.target)
        self.log = log
        self.pending: set[Path] = set()  # files of units that could not be delivered yet
        self.told: set[tuple[Path, str]] = set()

    # -- one pass ------------------------------------------------------------------

    def watched_for(self, path: Path) -> Watched | None:
        for store in self.stores:
            watched = classify(path, store)
            if watched is not None:
                return watched
        return None

    def _everything(self) -> list[Watched]:
        found = [w for store in self.stores for w in discover(store)]
        present = {str(w.path) for w in found}
        for row in self.offsets.rows.values():  # files gone since: their deletion
            if not row.deleted and row.path not in present:
                watched = self.watched_for(Path(row.path))
                if watched is not None:
                    found.append(watched)
        return found

    def run_pass(
        self, paths: Iterable[Path] | None = None, *, progress: bool = False
    ) -> PassResult:
        """Bring in what changed: in `paths`, or in every store when None."""
        if paths is None:
            candidates = self._everything()
        else:
            wanted = set(paths) | self.pending
            candidates = [w for w in map(self.watched_for, sorted(wanted)) if w is not None]
        self.pending = set()
        units: dict[Path, list[Change]] = {}
        for watched in candidates:
            change = detect(watched, self.offsets.get(watched.path))
            if change is not None:
                units.setdefault(watched.unit, []).append(change)
        result = PassResult(files=sum(len(c) for c in units.values()))
        for number, (unit, changes) in enumerate(units.items(), start=1):
            added = self._deliver(unit, changes)
            if added is None or added is _REFUSED:
                result.waiting += 1
                if added is None:  # soon again; a refused unit waits for a full pass
                    self.pending.update(change.watched.path for change in changes)
                continue
            result.units += 1
            result.messages += added
            if progress:
                self.log(
                    f"[{number}/{len(units)}] {changes[0].watched.agent} {unit}: +{added} messages"
                )
        return result

    def _deliver(self, unit: Path, changes: list[Change]):
        """Messages added; None to try again soon; _REFUSED to try at the next full pass."""
        agent = changes[0].watched.agent
        unit_row = self.offsets.get(unit)
        lines = unit_row.lines if unit_row is not None else 0
        for change in changes:
            if change.watched.path == unit and change.watched.kind == APPEND:
                lines = (0 if change.kind == "reset" else lines) + change.new_lines
        try:
            delivery = self.sink.deliver(unit, agent, changes, lines)
        except Retry as error:
            self._tell(unit, f"not now ({error}); next pass")
            return None
        except RemoteError as error:
            self.log(f"{unit}: refused by the server: {error}")
            return _REFUSED
        except DatabaseError as error:  # e.g. SQLite busy beyond its timeout: next pass
            self.log(f"{unit}: database error ({error}); next pass")
            close_old_connections()
            return None
        for problem in delivery.errors[:20]:
            self._tell(unit, problem)
        for index, change in enumerate(changes):
            self.offsets.record(change, delivery.messages if index == 0 else 0)
        return delivery.messages

    def _tell(self, unit: Path, problem: str) -> None:
        if (unit, problem) not in self.told:  # a file's standing problem, said once
            self.told.add((unit, problem))
            self.log(f"{unit}: {problem}")

    # -- following ----------------------------------------------------------------

    def follow(self, stop: threading.Event, *, poll: bool, interval: float, rescan: float) -> None:
        """Pass after pass until `stop` is set: on file events, or every `interval`
        seconds when polling; a full pass every `rescan` seconds catches anything the
        events missed (and stores created after the start)."""
        if poll:
            self.run_pass()
            while not stop.wait(interval):
                close_old_connections()  # a long-running watcher outlives connections
                self.run_pass()
            return
        from importers.watch.events import EventQueue

        with EventQueue(self.stores) as events:  # first: no write during the catch-up is missed
            self.run_pass()
            last_full = time.monotonic()
            while not stop.is_set():
                paths = events.wait(timeout=min(rescan, 1.0), stop=stop)
                close_old_connections()
                if paths or self.pending:
                    self.run_pass(paths)
                if time.monotonic() - last_full >= rescan or events.needs_full_pass():
                    events.schedule_new_roots()
                    self.run_pass()
                    last_full = time.monotonic()
