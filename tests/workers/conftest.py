"""Fixtures of the worker tests.

The crash, shutdown and load tests end with a whole-store integrity scan, which also
reports stored file objects that no row references. The large-file storage directory
lives for the whole test run, so objects written by earlier tests (whose rows were
flushed, and whose conversation ids get reused) are cleared first."""

import shutil
from pathlib import Path

import pytest
from django.conf import settings


@pytest.fixture(autouse=True)
def empty_large_file_storage():
    location = Path(settings.STORAGES["large_files"]["OPTIONS"]["options"]["location"])
    shutil.rmtree(location, ignore_errors=True)
    location.mkdir(parents=True, exist_ok=True)
    yield


@pytest.fixture
def sync_queue(settings):
    """Jobs dispatched by the reconciler run inline (django-q's sync mode)."""
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "sync": True}
    return settings
