"""Fixtures shared by the retrieval tests."""

from __future__ import annotations

import pytest

from tests.factories import append_messages
from tests.retrieval.dag_builder import build_dag


@pytest.fixture
def compacted(conversation):
    """48 messages: 4 leaves of 10 under one depth-1 summary, and an 8-message tail.
    test_dag and test_query_counts override it with deeper DAGs."""
    append_messages(conversation, 48)
    return conversation, build_dag(conversation, leaf_size=10, fanout=4, max_depth=1, tail=8)
