"""Test support for large files: a storage of the test's own, so parallel runs never share
files."""

from __future__ import annotations

import pytest
from django.core.files.storage import storages


@pytest.fixture
def large_file_storage(settings, tmp_path):
    """Point the `large_files` storage at a fresh directory for this test."""
    location = tmp_path / "large-files"
    settings.STORAGES = {
        **settings.STORAGES,
        "large_files": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(location)},
        },
    }
    storage = storages["large_files"]
    assert str(storage.location) == str(location)
    return storage
