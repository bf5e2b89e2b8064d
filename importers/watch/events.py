"""File events from `watchdog` (inotify, FSEvents, ...), gathered into sets of changed
paths. A store folder that does not exist yet (`~/.codex/sessions` before Codex's first
run) is awaited by watching its nearest existing parent, without recursion: a folder made
on the way to it asks for a full pass, which schedules the store as soon as it exists, so
its first file is read within a second rather than at the next rescan."""

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


class _AwaitRoots(FileSystemEventHandler):
    """On a parent of a store folder not there yet: a folder on the way to it appeared."""

    def __init__(self, queue: EventQueue):
        self.queue = queue

    def on_any_event(self, event):
        if not event.is_directory or event.event_type not in ("created", "moved"):
            return
        for path in (event.src_path, getattr(event, "dest_path", "")):
            if (
                path
                and Path(path.decode() if isinstance(path, bytes) else path) in self.queue.awaited
            ):
                self.queue.full_pass_wanted()


class EventQueue:
    def __init__(self, stores: list[Store]):
        self.stores = stores
        self.observer = Observer()
        self.scheduled: set[Path] = set()
        self.parents: set[Path] = set()  # watched (not recursively) for a store to appear
        self.awaited: set[Path] = set()  # the folders on the way to a missing store
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
        """Follow each store folder that exists; await the others from their nearest
        existing parent. Again until nothing changes: a folder made while a watch was
        being set up is seen here or by that watch."""
        changed = True
        while changed:
            changed = False
            self.awaited = set()
            for store in self.stores:
                if store.root in self.scheduled:
                    continue
                if store.root.is_dir():
                    self.observer.schedule(_Collect(self), str(store.root), recursive=True)
                    self.scheduled.add(store.root)
                    changed = True
                    continue
                parent = next((p for p in store.root.parents if p.is_dir()), None)
                self.awaited.update(p for p in store.root.parents if parent in p.parents)
                self.awaited.add(store.root)
                if parent is not None and parent not in self.parents:
                    self.observer.schedule(_AwaitRoots(self), str(parent), recursive=False)
                    self.parents.add(parent)
                    changed = True

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
