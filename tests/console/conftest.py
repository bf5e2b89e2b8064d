"""Console fixtures. The real-browser fixtures are tests/support/browser.py's."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _data_dir(data_dir):
    """Stream journals and event logs under this test's own directory (tests/conftest.py)."""
    return data_dir


@pytest.fixture
def sync_jobs(settings):
    """Turn jobs (the librarian's state commit, indexing) run as soon as they are queued,
    so a turn is committed when the runner returns. Without it they wait for a worker
    (or "commit pending now"), which is how the pending count is tested."""
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "sync": True}
    return settings
