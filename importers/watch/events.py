"""File events from `watchdog` (inotify, FSEvents, ...), gathered into sets of changed
paths. A store folder that does not exist yet is scheduled once it appears."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from watchdog.events import FileSystemEventHandler
from watchdog.observers import Observer

from importers.watch.stores import Store

DEBOUNCE = 0.05  # seconds: the writes of one save arrive together


class _Collect(FileSystemEventHandler):
    def __init__(self, queue: EventQueue):
        self.queue = queue

    def on_any_event(self, event):
        if event.event_type in ("opened", "closed_no_write"):
            return
        if event.is_directory:
            if event.event_type in ("deleted", "moved", "created"):
                self.queue.full_pass_wanted()
            return
        self.queue.add(event.src_path)
        if getattr(event, "dest_path", ""):
            self.queue.add(event.dest_path)


class EventQueue:
    def __init__(self, stores: list[Store]):
        self.stores = stores
        self.observer = Observer()
        self.scheduled: set[Path] = set()
        self.lock = threading.Lock()
        self.paths: set[Path] = set()
        self.full = False
        self.ready = threading.Event()

    def __enter__(self) -> EventQueue:
        self.schedule_new_roots()
        self.observer.start()
        return self

    def __exit__(self, *exc) -> None:
        self.observer.stop()
        self.observer.join(5)

    def schedule_new_roots(self) -> None:
        for store in self.stores:
            if store.root not in self.scheduled and store.root.is_dir():
                self.observer.schedule(_Collect(self), str(store.root), recursive=True)
                self.scheduled.add(store.root)

    def add(self, path: str | bytes) -> None:
        with self.lock:
            self.paths.add(Path(path.decode() if isinstance(path, bytes) else path))
        self.ready.set()

    def full_pass_wanted(self) -> None:
        with self.lock:
            self.full = True
        self.ready.set()

    def needs_full_pass(self) -> bool:
        with self.lock:
            full, self.full = self.full, False
        return full

    def wait(self, *, timeout: float, stop: threading.Event) -> set[Path]:
        if not self.ready.wait(timeout) or stop.is_set():
            return set()
        time.sleep(DEBOUNCE)
        with self.lock:
            paths, self.paths = self.paths, set()
            self.ready.clear()
        return paths
