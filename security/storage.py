"""A storage backend that encrypts objects at rest around any other backend.

`STORAGES["large_files"]` points here; OPTIONS name the real backend (the file system by
default, or an S3-compatible store from django-storages) and its options. Objects are
written through `encrypt_bytes` and read through `decrypt_bytes` (core/crypto.py), so
with no `LCM_ENCRYPTION_KEY` this is a plain pass-through, and objects written before
encryption was turned on stay readable. Callers keep using the Storage API unchanged
(`largefiles/store.py`).
"""

from __future__ import annotations

from django.core.files.base import ContentFile
from django.core.files.storage import Storage
from django.utils.module_loading import import_string

from core import crypto


class EncryptedStorage(Storage):
    def __init__(self, backend: str, options: dict | None = None) -> None:
        self.inner: Storage = import_string(backend)(**(options or {}))

    # Reads and writes go through the cipher.

    def save(self, name, content, max_length=None):
        content.seek(0)
        data = content.read()
        if isinstance(data, str):
            data = data.encode()
        return self.inner.save(name, ContentFile(crypto.encrypt_bytes(data)), max_length)

    def open(self, name, mode="rb"):
        if "w" in mode or "a" in mode or "+" in mode:
            raise ValueError("encrypted objects are written with save(), never opened to write")
        return ContentFile(self.read_clear(name), name=name)

    def _open(self, name, mode="rb"):
        return self.open(name, mode)

    def read_clear(self, name: str) -> bytes:
        return crypto.decrypt_bytes(self.read_stored(name))

    def read_stored(self, name: str) -> bytes:
        with self.inner.open(name, "rb") as handle:
            return handle.read()

    def size(self, name):
        data = self.read_stored(name)
        return len(crypto.decrypt_bytes(data)) if crypto.is_encrypted_bytes(data) else len(data)

    def rewrite(self, name: str, stored: bytes) -> None:
        """Replace an object's stored bytes in place (key rotation)."""
        self.inner.delete(name)
        saved = self.inner.save(name, ContentFile(stored))
        if saved != name:
            raise RuntimeError(f"storage wrote {saved!r} instead of {name!r}")

    # Everything else is the inner backend's.

    def exists(self, name):
        return self.inner.exists(name)

    def delete(self, name):
        return self.inner.delete(name)

    def listdir(self, path):
        return self.inner.listdir(path)

    def path(self, name):
        return self.inner.path(name)

    def url(self, name):
        return self.inner.url(name)

    def get_valid_name(self, name):
        return self.inner.get_valid_name(name)

    def get_available_name(self, name, max_length=None):
        return self.inner.get_available_name(name, max_length)

    def generate_filename(self, filename):
        return self.inner.generate_filename(filename)

    def get_accessed_time(self, name):
        return self.inner.get_accessed_time(name)

    def get_created_time(self, name):
        return self.inner.get_created_time(name)

    def get_modified_time(self, name):
        return self.inner.get_modified_time(name)
