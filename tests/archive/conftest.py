"""Fixtures of the archive tests: a per-test archive folder (`compacted`: tests/conftest.py)."""

from __future__ import annotations

import pytest
from django.core.files.storage import storages

from archive.selectors import forget


@pytest.fixture(autouse=True)
def archive_folder(tmp_path, settings):
    """Segments of this test under its own folder, and a cold read cache."""
    location = tmp_path / "archive"
    settings.STORAGES = {
        **settings.STORAGES,
        "archive_segments": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(location)},
        },
    }
    storages._storages.pop("archive_segments", None)
    forget()
    yield location
    storages._storages.pop("archive_segments", None)
    forget()
