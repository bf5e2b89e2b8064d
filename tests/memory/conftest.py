"""Fixtures of the memory tests: chat sessions through the real turn services, turns run
by the real runner with the offline provider (no key, no network)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _offline(offline_engine, fresh_vector_caches):
    """Every memory test runs offline with empty vector caches (tests/conftest.py)."""
