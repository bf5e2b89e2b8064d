"""Where stream journals and turn event logs are kept once finished: the `stream_journals`
storage (Django's storage API, so an S3-compatible store can hold them; docs/deploy.md).

Object stores have no append, and the flush policy (SRD 13.2) relies on the OS's page
cache and fsync, so a live journal is always appended to a local file
(`{data_dir}/streams/<name>`). When its stream ends (close marker written and fsynced),
or when the reconciler has closed a dead writer's files, the whole file is published to
the storage under the same name and the local copy is removed: one object per finished
journal or event log, written once. Readers take the local file while it exists (a live
or not yet published journal) and the stored object otherwise, so replay works from any
host, and crash recovery reads the local tail the dead writer left on its own disk.

With the default storage (the file system) the local file already is the stored object,
and publishing does nothing.
"""

from __future__ import annotations

import logging
from pathlib import Path

from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage, Storage, storages

logger = logging.getLogger("lcm.turns")


def shared_storage() -> Storage | None:
    """The storage finished journals go to, or None when it is the local file system."""
    storage = storages["stream_journals"]
    return None if isinstance(storage, FileSystemStorage) else storage


def publish(path: Path) -> bool:
    """Copy a finished local file to the shared storage and remove it here. True when it
    was published; a failure is logged and the local file kept (a reader still finds it)."""
    storage = shared_storage()
    if storage is None:
        return False
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return False
    try:
        if storage.exists(path.name):  # a retried publish: the object is replaced whole
            storage.delete(path.name)
        saved = storage.save(path.name, ContentFile(data))
        if saved != path.name:
            storage.delete(saved)
            raise RuntimeError(f"storage wrote {saved!r} instead of {path.name!r}")
    except Exception:
        logger.exception("publishing %s to the journal storage failed; kept locally", path.name)
        return False
    path.unlink(missing_ok=True)
    return True


def read_bytes(path: Path) -> bytes:
    """The local file, else the published object; FileNotFoundError when neither exists."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        storage = shared_storage()
        if storage is None or not storage.exists(path.name):
            raise
    with storage.open(path.name, "rb") as handle:
        return handle.read()


def exists(path: Path) -> bool:
    if path.exists():
        return True
    storage = shared_storage()
    return storage is not None and storage.exists(path.name)


def delete(path: Path) -> None:
    """Remove the local file and the published object (hard delete)."""
    path.unlink(missing_ok=True)
    storage = shared_storage()
    if storage is not None:
        storage.delete(path.name)


def write_bytes(path: Path, data: bytes) -> None:
    """Replace a file's bytes where it lives (key rotation): the local file when there is
    one, else the published object."""
    storage = shared_storage()
    if path.exists() or storage is None:
        temporary = path.with_suffix(path.suffix + ".tmp")
        temporary.write_bytes(data)
        temporary.replace(path)
        return
    storage.delete(path.name)
    storage.save(path.name, ContentFile(data))
