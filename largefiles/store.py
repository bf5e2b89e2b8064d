"""The bytes of large files, through Django's storage API (`storages["large_files"]`).

Keys are `<conversation_id>/<file_id><extension>`: the conversation id is an integer, the
file id is generated, and the extension comes from a fixed allow-list, so nothing a user
sends (a file name like `../../etc/passwd`) ever becomes part of a path.
"""

from __future__ import annotations

from django.core.files.base import ContentFile
from django.core.files.storage import Storage, storages


def file_storage() -> Storage:
    return storages["large_files"]


def storage_key(*, conversation_id: int, file_id: str, extension: str) -> str:
    return f"{int(conversation_id)}/{file_id}{extension}"


def write_object(key: str, data: bytes) -> None:
    """Write a new object at exactly `key` (never a renamed copy)."""
    storage = file_storage()
    if storage.exists(key):  # left by an ingest that wrote it and then failed to commit
        storage.delete(key)
    saved = storage.save(key, ContentFile(data))
    if saved != key:
        storage.delete(saved)
        raise RuntimeError(f"storage wrote {saved!r} instead of {key!r}")


def delete_objects(keys: list[str]) -> None:
    storage = file_storage()
    for key in keys:
        storage.delete(key)


def read_range(key: str, *, offset: int, limit: int) -> bytes:
    with file_storage().open(key, "rb") as handle:
        handle.seek(offset)
        return handle.read(limit)
