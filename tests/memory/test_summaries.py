"""Summaries in grep's semantic and hybrid modes: embedded after a compaction commits
(its after-commit hook queues the job), idempotently, and found by meaning with ids
that describe and expand accept."""

import pytest
from django.utils import timezone

from compaction.planning import context_rows
from compaction.store import NewSummary, apply_summary, summary_id_for
from memory.indexing import index_conversation_messages
from memory.models import SummaryVector
from memory.namespaces import search_namespace
from memory.summaries import index_summaries
from tests.memory.helpers import append

pytestmark = pytest.mark.django_db

SUMMARY = (
    "The user and the assistant settled where the automobile is kept: in the green crate "
    "beside the boiler, until the garage is repaired."
)
OTHER = "The quarterly report needs two more charts about revenue per region."


def compact(conversation, content: str, messages: int = 2) -> str:
    """Apply one leaf summary over the oldest `messages` context items, as compaction does."""
    rows = [r for r in context_rows(conversation.pk) if r.message_id][:messages]
    now = timezone.now()
    ids = [r.message_id for r in rows]
    summary = NewSummary(
        id=summary_id_for(conversation_id=conversation.pk, kind="leaf", depth=0, sources=ids),
        conversation_id=conversation.pk,
        kind="leaf",
        depth=0,
        level="normal",
        content=content,
        token_count=len(content) // 4,
        earliest_at=now,
        latest_at=now,
        descendant_count=0,
        descendant_token_count=sum(r.token_count for r in rows),
        source_token_count=sum(r.token_count for r in rows),
        model="test",
        file_ids=[],
        message_ids=ids,
    )
    apply_summary(summary=summary, planned_item_ids=[r.item_id for r in rows])
    return summary.id


@pytest.fixture
def summarised(conversation, settings, django_capture_on_commit_callbacks):
    """A conversation with one summary about the car, its vector written by the job the
    compaction commit queued (run inline)."""
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "sync": True}
    append(conversation, "where is the car", "in the crate", "ok", "thanks")
    with django_capture_on_commit_callbacks(execute=True):
        summary_id = compact(conversation, SUMMARY)
    return summary_id


def test_a_compaction_commit_indexes_its_summary(summarised):
    namespace = search_namespace()
    assert list(SummaryVector.objects.values_list("summary_id", "namespace_id")) == [
        (summarised, namespace.pk)
    ]


def test_summary_indexing_is_idempotent(conversation):
    append(conversation, "a", "b", "c", "d")
    first = compact(conversation, SUMMARY)
    second = compact(conversation, OTHER)
    assert index_summaries(conversation_id=conversation.pk) == 2
    assert index_summaries(conversation_id=conversation.pk) == 0
    assert index_summaries() == 0
    assert sorted(SummaryVector.objects.values_list("summary_id", flat=True)) == sorted(
        [first, second]
    )


def test_an_uncommitted_compaction_queues_nothing(conversation, django_capture_on_commit_callbacks):
    append(conversation, "a", "b")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        compact(conversation, SUMMARY)
    # the hook runs on commit only (compaction's own scheduling may add more callbacks)
    assert SummaryVector.objects.count() == 0
    assert callbacks


@pytest.mark.embedding_model
def test_grep_semantic_finds_a_summary_by_meaning_with_an_id_describe_accepts(api, summarised):
    response = api.post(
        "/api/v1/grep/",
        {"query": "Where did we leave the car?", "mode": "semantic", "scope": "summaries"},
        format="json",
    )
    assert response.status_code == 200, response.content
    results = response.json()["results"]
    assert [(r["type"], r["id"]) for r in results] == [("summary", summarised)]
    assert results[0]["kind"] == "leaf" and results[0]["depth"] == 0
    assert results[0]["snippet"] == SUMMARY
    assert results[0]["score"] >= 0.72
    described = api.get(f"/api/v1/describe/{summarised}/")
    assert described.status_code == 200
    expanded = api.post("/api/v1/expand/", {"summary_id": summarised}, format="json")
    assert expanded.status_code == 200, expanded.content


@pytest.mark.embedding_model
def test_grep_semantic_over_both_ranks_chunks_and_summaries_together(
    api, conversation, summarised, settings
):
    settings.LCM_CHUNK_TOPIC_SHIFT = 2.0
    append(conversation, "Note for later: the automobile is stored in the green crate.")
    index_conversation_messages(conversation_id=conversation.pk)
    response = api.post(
        "/api/v1/grep/", {"query": "Where did we leave the car?", "mode": "semantic"}, format="json"
    )
    results = response.json()["results"]
    assert {r["type"] for r in results} == {"chunk", "summary"}
    scores = [r["score"] for r in results]
    assert scores == sorted(scores, reverse=True)
    messages_only = api.post(
        "/api/v1/grep/",
        {"query": "Where did we leave the car?", "mode": "semantic", "scope": "messages"},
        format="json",
    ).json()["results"]
    assert {r["type"] for r in messages_only} == {"chunk"}


@pytest.mark.embedding_model
def test_grep_hybrid_merges_a_summary_found_by_vector_and_by_full_text(api, summarised):
    response = api.post(
        "/api/v1/grep/",
        {"query": "automobile boiler", "mode": "hybrid", "scope": "summaries"},
        format="json",
    )
    assert response.status_code == 200, response.content
    results = response.json()["results"]
    assert [(r["type"], r["id"]) for r in results] == [("summary", summarised)]
    # found by both legs: two reciprocal-rank terms at rank 1
    assert results[0]["score"] == round(2 / 61, 6)


def test_grep_semantic_summaries_respect_the_callers_scope(other_api, summarised):
    response = other_api.post(
        "/api/v1/grep/",
        {"query": "Where did we leave the car?", "mode": "semantic", "scope": "summaries"},
        format="json",
    )
    assert response.json() == {"results": []}


def test_an_unrelated_query_finds_no_summary(api, summarised):
    response = api.post(
        "/api/v1/grep/",
        {"query": "chocolate cake recipe with hazelnuts", "mode": "semantic"},
        format="json",
    )
    assert response.json() == {"results": []}
