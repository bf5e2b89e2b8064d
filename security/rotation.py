"""Re-encrypt everything stored outside the database under the current key.

Large-file objects (through the `large_files` storage), archive segments (a new object per
segment, verified, then the row switched to it: archive.services.segment_reencrypt) and
the JSON-lines files under
`{data_dir}/streams/` (stream journals, turn event logs). Each file is rewritten whole:
journals to a temporary file renamed over the original (atomic on POSIX), objects through
the storage. A journal still being appended to by a live stream is skipped (its writer
would append to the replaced inode); run the command again once streams have ended.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.core.files.storage import storages

from archive.services import segments_reencrypt
from core import crypto
from security.storage import EncryptedStorage

# A streams file modified this recently may still have a writer.
BUSY_SECONDS = 30.0


@dataclass
class RotationReport:
    objects: int = 0
    journal_files: int = 0
    archive_segments: int = 0  # re-encrypted (archive.services.segments_reencrypt)
    skipped_busy: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)  # no configured key opens them

    def as_dict(self) -> dict:
        return {
            "objects": self.objects,
            "journal_files": self.journal_files,
            "archive_segments": self.archive_segments,
            "skipped_busy": len(self.skipped_busy),
            "unreadable": len(self.unreadable),
        }


def _object_keys(storage) -> list[str]:
    keys: list[str] = []
    try:  # not exists(""): an object store has no folder object to find
        folders, files = storage.listdir("")
    except FileNotFoundError:
        return keys
    keys += files
    for folder in folders:
        keys += [f"{folder}/{name}" for name in storage.listdir(folder)[1]]
    return keys


def rotate_objects() -> tuple[int, list[str]]:
    storage = storages["large_files"]
    if not isinstance(storage, EncryptedStorage):
        return 0, []  # a backend configured without the encrypting wrapper stores clear bytes
    count, unreadable = 0, []
    for key in _object_keys(storage):
        stored = storage.read_stored(key)
        try:
            rotated = crypto.rotate_bytes(stored)
        except crypto.DecryptionError:
            unreadable.append(key)  # left as it is: an old key is missing from the list
            continue
        if rotated != stored:
            storage.rewrite(key, rotated)
            count += 1
    return count, unreadable


def rotate_streams(*, busy_seconds: float = BUSY_SECONDS) -> tuple[int, list[str]]:
    folder = Path(settings.DATA_DIR) / "streams"
    count = _rotate_published_streams(folder)
    if not folder.is_dir():
        return count, []
    busy: list[str] = []
    now = time.time()
    for path in sorted(folder.glob("*.jsonl")):
        if now - path.stat().st_mtime < busy_seconds:
            busy.append(path.name)
            continue
        lines = [raw for raw in path.read_bytes().split(b"\n") if raw.strip()]
        rotated = []
        for raw in lines:
            try:
                rotated.append(crypto.rotate_line(raw))
            except crypto.DecryptionError:
                rotated.append(raw)  # a torn tail stays as it was; readers skip it
        if rotated == lines:
            continue
        temporary = path.with_suffix(".rotating")
        with open(temporary, "wb") as handle:
            handle.write(b"".join(line + b"\n" for line in rotated))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
        count += 1
    return count, busy


def rotate_all(*, busy_seconds: float = BUSY_SECONDS) -> RotationReport:
    report = RotationReport()
    report.objects, report.unreadable = rotate_objects()
    segments = segments_reencrypt()
    report.archive_segments = segments.segments
    report.unreadable += [f"archive:{key}" for key in segments.unreadable]
    report.journal_files, report.skipped_busy = rotate_streams(busy_seconds=busy_seconds)
    return report


def _rotate_published_streams(folder: Path) -> int:
    """Finished journals and event logs published to a shared storage (turns/journal_store.py):
    written once and never appended to again, so none is busy."""
    from turns import journal_store

    storage = journal_store.shared_storage()
    if storage is None:
        return 0
    count = 0
    for name in sorted(storage.listdir("")[1]):
        if not name.endswith(".jsonl"):
            continue
        path = folder / name
        lines = [raw for raw in journal_store.read_bytes(path).split(b"\n") if raw.strip()]
        rotated = []
        for raw in lines:
            try:
                rotated.append(crypto.rotate_line(raw))
            except crypto.DecryptionError:
                rotated.append(raw)
        if rotated != lines:
            journal_store.write_bytes(path, b"".join(line + b"\n" for line in rotated))
            count += 1
    return count
