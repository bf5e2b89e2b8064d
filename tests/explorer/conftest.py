"""Explorer fixtures: conversations compacted by the real engine (deterministic
summarizer), so pages are tested against lineage the product itself wrote."""

from __future__ import annotations

import pytest

from tests.explorer.helpers import compact
from tests.factories import ConversationFactory, append_messages


@pytest.fixture
def file_storage(settings, tmp_path):
    """Large files stored under this test's own directory (nothing left behind to be
    found by another test's integrity scan)."""
    settings.STORAGES = {
        **settings.STORAGES,
        "large_files": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path / "large-files")},
        },
    }
    settings.LCM_LARGE_FILE_TOKEN_THRESHOLD = 100
    return settings


@pytest.fixture
def compacted_by_engine(user, small_chunks):
    """120 messages compacted by the real engine into leaves and at least one condensed
    summary (tests/conftest.py's `compacted` is a hand-built DAG)."""
    conversation = ConversationFactory(owner=user, session_id="compacted", title="Compacted")
    append_messages(conversation, 120)
    result = compact(conversation)
    assert result.status == "compacted"
    return conversation
