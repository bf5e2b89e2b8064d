"""What changed in a watched file since its stored offset or signature.

Append-only files: the bytes after the offset, up to the last newline (a half-written
last line waits for its end). A file shorter than the offset, or whose first bytes are
not the ones read before, was truncated or replaced: it is read again from the start
(the import is idempotent, so what was already stored is not stored twice). Files
rewritten whole: the signature (size, modification time, inode) changed.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from importers.models import WatchedFile
from importers.watch.stores import APPEND, Watched

HEAD_BYTES = 1024  # enough to tell one session's file from another's (ids, times)
READ_LIMIT = 64 * 1024 * 1024  # bytes read per pass; the rest on the next one


@dataclass
class Change:
    watched: Watched
    kind: str  # "grew", "reset" (truncated or replaced), "rewritten", "deleted"
    start: int = 0  # first byte of the new region (append files)
    end: int = 0  # the new offset: after the last complete line
    new_lines: int = 0  # complete lines in [start, end)
    head: str = ""
    signature: str = ""


def signature(path: Path) -> str:
    stat = path.stat()
    parts = [f"{stat.st_size}:{stat.st_mtime_ns}:{stat.st_ino}"]
    wal = path.with_name(path.name + "-wal")  # OpenCode's database writes its WAL first
    if path.name.endswith(".db") and wal.exists():
        wal_stat = wal.stat()
        parts.append(f"{wal_stat.st_size}:{wal_stat.st_mtime_ns}")
    return "/".join(parts)


def _head(path: Path, upto: int) -> str:
    with path.open("rb") as handle:
        return hashlib.sha256(handle.read(min(upto, HEAD_BYTES))).hexdigest()


def detect(watched: Watched, row: WatchedFile | None) -> Change | None:
    """The change to bring in, or None when there is nothing new (yet)."""
    path = watched.path
    if not path.exists():
        if row is not None and not row.deleted:
            return Change(watched, "deleted")
        return None
    if watched.kind != APPEND:
        current = signature(path)
        if row is not None and row.signature == current and not row.deleted:
            return None
        return Change(watched, "rewritten", signature=current)
    return _appended(watched, row)


def _appended(watched: Watched, row: WatchedFile | None) -> Change | None:
    path = watched.path
    size = path.stat().st_size
    offset = row.offset if row is not None and not row.deleted else 0
    kind = "grew"
    if row is not None and offset and (size < offset or _head(path, offset) != row.head):
        kind, offset = "reset", 0
    if size <= offset:
        return None
    with path.open("rb") as handle:
        handle.seek(offset)
        data = handle.read(min(size - offset, READ_LIMIT))
    last = data.rfind(b"\n")
    if last < 0:
        return None if kind == "grew" else Change(watched, kind, 0, 0, 0, "")
    end = offset + last + 1
    return Change(
        watched,
        kind,
        start=offset,
        end=end,
        new_lines=data.count(b"\n", 0, last + 1),
        head=_head(path, end),
        signature=f"{size}",
    )


def read_region(path: Path, start: int, end: int) -> bytes:
    with path.open("rb") as handle:
        handle.seek(start)
        return handle.read(end - start)


def path_key(path: Path | str) -> str:
    return hashlib.sha256(os.fsencode(str(path))).hexdigest()
