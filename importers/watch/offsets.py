"""The watcher's offsets in the database (`importers.WatchedFile`), one row per file and
target, kept in memory between passes and written after each delivery."""

from __future__ import annotations

from importers.models import WatchedFile
from importers.watch.changes import Change, path_key


class Offsets:
    def __init__(self, target: str):
        self.target = target
        self.rows = {row.path_key: row for row in WatchedFile.objects.filter(target=target)}

    def get(self, path) -> WatchedFile | None:
        return self.rows.get(path_key(path))

    def record(self, change: Change, messages: int = 0) -> None:
        """Store what `change` brought in (called only once it was delivered)."""
        watched = change.watched
        row = self.get(watched.path)
        if row is None:
            row = WatchedFile(
                target=self.target,
                path=str(watched.path),
                path_key=path_key(watched.path),
                agent=watched.agent,
                format=watched.agent,
            )
        if change.kind == "deleted":
            row.deleted = True
        elif change.kind == "rewritten":
            row.deleted, row.signature = False, change.signature
        else:
            if change.kind == "reset":
                row.lines = 0
            row.deleted = False
            row.offset, row.head = change.end, change.head
            row.lines += change.new_lines
            row.signature = change.signature
        row.messages += messages
        row.save()
        self.rows[row.path_key] = row
