"""Fixtures shared by the compaction tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def small_chunks(settings):
    """Small chunks and targets, so a few hundred messages make several levels of summaries."""
    settings.LCM_LEAF_CHUNK_TOKENS = 400
    settings.LCM_LEAF_TARGET_TOKENS = 120
    settings.LCM_CONDENSED_TARGET_TOKENS = 160
    settings.LCM_LEAF_MIN_FANOUT = 4
    settings.LCM_CONDENSED_MIN_FANOUT = 3
    return settings
