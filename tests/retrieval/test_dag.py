"""Lineage traversals: covering summaries, subtree, manifest and expand, each one query."""

from __future__ import annotations

import pytest

from conversations.models import Message
from retrieval import selectors
from tests.factories import append_messages
from tests.retrieval.dag_builder import build_dag

pytestmark = pytest.mark.django_db


@pytest.fixture
def compacted_depth_2(conversation):
    """Deeper than tests/conftest.py's `compacted`: a depth-2 summary on top."""
    append_messages(conversation, 88)  # 80 summarized: 8 leaves, 2 condensed d1, 1 d2; tail 8
    return conversation, build_dag(conversation, leaf_size=10, fanout=4, max_depth=2, tail=8)


def test_the_builder_makes_the_expected_shape(compacted_depth_2):
    _, dag = compacted_depth_2
    assert len(dag.leaves) == 8
    assert [len(level) for level in dag.condensed] == [2, 1]
    assert len(dag.top) == 1 and dag.top[0].depth == 2
    assert [m.seq for m in dag.tail] == list(range(81, 89))


def test_covering_summaries_names_the_active_summary_or_none(
    compacted_depth_2, django_assert_num_queries
):
    conversation, dag = compacted_depth_2
    old = Message.objects.get(conversation=conversation, seq=5)
    fresh = Message.objects.get(conversation=conversation, seq=85)
    with django_assert_num_queries(1):
        covering = selectors.covering_summaries(
            conversation_id=conversation.pk, message_ids=[old.pk, fresh.pk]
        )
    assert covering == {old.pk: dag.top[0].id, fresh.pk: None}


def test_covering_summaries_ignores_messages_of_another_conversation(
    compacted_depth_2, make_conversation
):
    conversation, _ = compacted_depth_2
    other = make_conversation(messages=3)
    theirs = Message.objects.filter(conversation=other).first()
    assert (
        selectors.covering_summaries(conversation_id=conversation.pk, message_ids=[theirs.pk]) == {}
    )


def test_subtree_lists_every_descendant_in_dag_order(compacted_depth_2, django_assert_num_queries):
    _, dag = compacted_depth_2
    with django_assert_num_queries(1):
        nodes = selectors.summary_subtree(summary_id=dag.top[0].id)
    expected = [dag.top[0].id]
    for d1 in dag.condensed[0]:
        expected.append(d1.id)
        expected.extend(leaf.id for leaf in dag.leaves if leaf.id in d1.content)
    assert [n.id for n in nodes] == expected
    assert [n.level for n in nodes][:3] == [0, 1, 2]


def test_manifest_counts_summaries_per_depth_and_messages(compacted_depth_2):
    _, dag = compacted_depth_2
    manifest = selectors.summary_manifest(summary_id=dag.top[0].id)
    assert manifest["summaries_by_depth"] == [
        {"depth": 2, "count": 1, "tokens": 30},
        {"depth": 1, "count": 2, "tokens": 60},
        {"depth": 0, "count": 8, "tokens": 160},
    ]
    assert manifest["message_count"] == 80
    assert manifest["source_seq_range"] == [1, 80]


def test_expand_depth_one_returns_the_direct_sources(compacted_depth_2, django_assert_num_queries):
    _, dag = compacted_depth_2
    top = dag.top[0]
    with django_assert_num_queries(1):
        result = selectors.expand_summary(top, depth=1, include_messages=False, token_cap=4000)
    assert [s["id"] for s in result.summaries] == [s.id for s in dag.condensed[0]]
    assert result.messages == []
    assert result.token_estimate == 60
    assert result.truncated is False and result.omitted_ids == []


def test_expanding_to_messages_returns_the_originals_in_order_byte_for_byte(compacted_depth_2):
    conversation, dag = compacted_depth_2
    result = selectors.expand_summary(
        dag.top[0], depth=10, include_messages=True, token_cap=10_000_000
    )
    originals = list(
        Message.objects.filter(conversation=conversation, seq__lte=80)
        .order_by("seq")
        .values_list("id", "seq", "role", "content")
    )
    assert [(m["id"], m["seq"], m["role"], m["content"]) for m in result.messages] == originals
    assert len(result.summaries) == 10


def test_expand_cuts_at_the_token_cap_and_names_what_it_omitted(compacted_depth_2):
    _, dag = compacted_depth_2
    leaf = dag.leaves[0]
    full = selectors.expand_summary(leaf, depth=1, include_messages=True, token_cap=10**9)
    assert len(full.messages) == 10
    cap = sum(m["token_count"] for m in full.messages[:4])
    cut = selectors.expand_summary(leaf, depth=1, include_messages=True, token_cap=cap)
    assert [m["id"] for m in cut.messages] == [m["id"] for m in full.messages[:4]]
    assert cut.truncated is True
    assert cut.omitted_ids == [m["id"] for m in full.messages[4:]]
    assert cut.token_estimate == cap


@pytest.mark.parametrize("scale", [0.0, 0.5, 20.0])
def test_wrong_stored_counts_never_break_the_cap_or_the_order(conversation, scale):
    append_messages(conversation, 88)
    dag = build_dag(conversation, leaf_size=10, fanout=4, max_depth=2, stored_count_scale=scale)
    top = dag.top[0]
    full = selectors.expand_summary(top, depth=10, include_messages=True, token_cap=10**9)
    assert len(full.messages) == 80 and not full.truncated
    cap = 60 * 11  # summaries (10 x 20-30 tokens) and some messages
    cut = selectors.expand_summary(top, depth=10, include_messages=True, token_cap=cap)
    assert cut.truncated is True
    assert cut.token_estimate <= cap
    kept = [m["id"] for m in cut.messages]
    assert kept == [m["id"] for m in full.messages[: len(kept)]]  # a prefix, in order
    assert cut.omitted_message_count == 80 - len(kept)
