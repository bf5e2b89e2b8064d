"""Fixtures of the archive tests: a compacted conversation and a per-test archive folder."""

from __future__ import annotations

import pytest
from django.core.files.storage import storages

from archive.selectors import forget
from tests.factories import append_messages
from tests.retrieval.dag_builder import build_dag


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


@pytest.fixture
def compacted(conversation):
    """48 messages: 4 leaves of 10 under one depth-1 summary, and an 8-message tail (seq 41-48
    stay in the active context)."""
    append_messages(conversation, 48)
    return conversation, build_dag(conversation, leaf_size=10, fanout=4, max_depth=1, tail=8)
