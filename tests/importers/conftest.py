"""Fixtures of the importer tests: the lossless-claw fixture database (copied, so no test
can touch the original), the transcript fixtures, and a large-file storage per test."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.largefile_support import large_file_storage  # noqa: F401

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures"
LOSSLESS_CLAW = FIXTURES / "lossless-claw-0.15.3"  # vendored: see its README.md


@pytest.fixture
def lc_fixture() -> Path:
    assert (LOSSLESS_CLAW / "lcm.db").is_file(), f"missing fixture {LOSSLESS_CLAW}"
    return LOSSLESS_CLAW


@pytest.fixture
def lc_copy(tmp_path, lc_fixture) -> Path:
    """A writable copy of the fixture database, alone in its directory (no lcm-files)."""
    target = tmp_path / "moved" / "lcm.db"
    target.parent.mkdir()
    shutil.copy(lc_fixture / "lcm.db", target)
    return target


@pytest.fixture(autouse=True)
def _storage(large_file_storage):  # noqa: F811
    return large_file_storage


@pytest.fixture
def sync_jobs(settings):
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "sync": True}
    return settings
