"""Fixtures of the watcher tests: agent stores laid out like the agents' own, in tmp."""

from __future__ import annotations

import pytest

from importers.watch.local import LocalSink
from importers.watch.loop import Watcher
from importers.watch.stores import make_stores
from tests.largefile_support import large_file_storage  # noqa: F401


@pytest.fixture(autouse=True)
def _storage(large_file_storage):  # noqa: F811
    return large_file_storage


@pytest.fixture
def stores(tmp_path):
    roots = {
        "claude-code": [tmp_path / "claude" / "projects"],
        "codex": [tmp_path / "codex" / "sessions", tmp_path / "codex" / "archived_sessions"],
        "opencode": [tmp_path / "opencode"],
        "gemini": [tmp_path / "gemini" / "tmp"],
    }
    for folders in roots.values():
        for folder in folders:
            folder.mkdir(parents=True)
    return make_stores(roots)


@pytest.fixture
def new_watcher(stores, user):
    """A fresh watcher each call: offsets read back from the database (a restart)."""

    def make() -> Watcher:
        return Watcher(stores, LocalSink(user), log=lambda text: None)

    return make
