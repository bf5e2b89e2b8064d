"""Shared fixtures of the security tests."""

import pytest


@pytest.fixture(autouse=True)
def jobs_run_at_once(settings):
    """Redaction and export jobs run as they are queued (after the commit), as a worker
    would run them: an API test reads the finished job from its URL."""
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "sync": True}
