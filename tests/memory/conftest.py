"""Fixtures of the memory tests: chat sessions through the real turn services, turns run
by the real runner with the offline provider (no key, no network)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _offline_engine(settings, monkeypatch, tmp_path):
    for name in ("LCM_CONFIG_FILE", "LCM_DEFAULT_MODEL", "ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    settings.DATA_DIR = tmp_path
    settings.LCM_LIBRARIAN_MODEL = "haiku"  # no key: the deterministic librarian


@pytest.fixture(autouse=True)
def _fresh_vector_caches():
    """Each test starts with empty per-process vector matrices: summary ids are derived
    from their sources, so a rolled-back test's summary id comes back in the next test
    with other content, which the cache's staleness check (by id) cannot see."""
    from memory.vectors.numpy_exact import INDEX, SUMMARY_INDEX

    INDEX.reset()
    SUMMARY_INDEX.reset()
