"""Hot paths issue a fixed number of queries whatever the size of the DAG or the hits."""

from __future__ import annotations

import pytest
from django.db import connection

from retrieval import selectors
from retrieval.grep import GrepRequest, grep_for_user
from tests.factories import append_messages
from tests.retrieval.dag_builder import build_dag

pytestmark = pytest.mark.django_db


@pytest.fixture
def compacted_depth_3(conversation):
    """160 messages under a depth-3 summary: the queries must not grow with depth."""
    append_messages(conversation, 168)
    return conversation, build_dag(conversation, leaf_size=10, fanout=4, max_depth=3, tail=8)


def test_describe_is_three_queries(user, compacted_depth_3, django_assert_num_queries):
    _, dag = compacted_depth_3
    with django_assert_num_queries(3):  # the summary (access-checked), lineage, manifest
        body = selectors.describe_for_user(user=user, item_id=dag.top[0].id)
    assert body["manifest"]["message_count"] == 160


def test_expand_is_two_queries_at_any_depth(user, compacted_depth_3, django_assert_num_queries):
    _, dag = compacted_depth_3
    for depth in (1, 3, 10):
        with django_assert_num_queries(2):  # the summary (access-checked), the traversal
            selectors.expand_for_user(
                user=user,
                summary_id=dag.top[0].id,
                depth=depth,
                include_messages=True,
                token_cap=10**9,
            )


def test_grep_cost_does_not_grow_with_the_hits(user, compacted_depth_3, django_assert_num_queries):
    # SQLite: pick and mark the hits (one statement), covering summaries. PostgreSQL: the
    # search and covering summaries, plus the time limit statement and, inside an outer
    # transaction (as in tests), the savepoint pair and the restore of the limit. Then the
    # origins of the hits' conversations (one query for all).
    expected = 3 if connection.vendor == "sqlite" else 7
    for limit in (1, 50, 150):
        with django_assert_num_queries(expected):
            hits = grep_for_user(
                user=user, request=GrepRequest(query="failing", scope="messages", limit=limit)
            )
        assert len(hits) == limit
