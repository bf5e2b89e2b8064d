"""The memory API and grep's semantic/hybrid modes, through the real HTTP stack."""

import pytest

from memory.indexing import index_conversation_messages, index_turn
from memory.models import Chunk
from tests.memory.helpers import append, run_turn
from turns import services

pytestmark = pytest.mark.django_db

FACT = "Note for later: the automobile is stored in the green crate beside the boiler."


@pytest.fixture
def branch(user):
    session = services.session_create(owner=user, title="chat")
    turn = run_turn(session, FACT)
    index_turn(turn_id=turn.id)
    return turn.branch


def test_retrieve_returns_scored_chunks_with_provenance(api, branch):
    response = api.post(
        f"/api/v1/branches/{branch.pk}/retrieve/", {"query": "Where is the car?"}, format="json"
    )
    assert response.status_code == 200, response.content
    body = response.json()
    first = body["results"][0]
    assert FACT in first["text"]
    assert first["rank"] == 1
    assert 0.0 <= first["similarity"] <= 1.0
    assert first["provenance"]["branch_id"] == branch.pk
    assert first["provenance"]["conversation_id"] == branch.conversation_id
    assert body["stats"]["selected"] == len(body["results"])


def test_retrieve_is_a_search_with_a_date_on_every_item(api, branch, settings):
    # the console's and API's retrieve rank as grep does: a turn's similarity threshold
    # (here one nothing passes) does not apply
    settings.LCM_RETRIEVAL_SIMILARITY_THRESHOLD = 2.0
    response = api.post(
        f"/api/v1/branches/{branch.pk}/retrieve/",
        {"query": "volcanic eruptions in Iceland", "top_k": 50},
        format="json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    chunks = {c.pk: c for c in Chunk.objects.filter(branch_id=branch.pk)}
    assert {r["chunk_id"] for r in body["results"]} == set(chunks)
    for row in body["results"]:
        recorded = chunks[row["chunk_id"]].source_created_at
        assert row["provenance"]["created_at"] == recorded.isoformat()
    assert [r["rank"] for r in body["results"]] == list(range(1, len(chunks) + 1))
    assert body["stats"]["mode"] == "hybrid"
    assert body["stats"]["selected"] == len(chunks)


def test_retrieve_validates_its_input(api, branch):
    url = f"/api/v1/branches/{branch.pk}/retrieve/"
    for payload in ({}, {"query": ""}, {"query": "x", "top_k": 0}, {"query": "x", "top_k": "a"}):
        response = api.post(url, payload, format="json")
        assert response.status_code == 400, payload
        assert set(response.json()) == {"code", "message", "extra"}


def test_another_users_branch_is_not_found(other_api, branch):
    response = other_api.post(
        f"/api/v1/branches/{branch.pk}/retrieve/", {"query": "car"}, format="json"
    )
    assert response.status_code == 404
    assert other_api.get(f"/api/v1/branches/{branch.pk}/chunks/").status_code == 404


def test_the_chunk_browser_lists_and_filters(api, branch):
    response = api.get(f"/api/v1/branches/{branch.pk}/chunks/")
    assert response.status_code == 200
    rows = response.json()["results"]
    assert {r["id"] for r in rows} == set(
        Chunk.objects.filter(branch_id=branch.pk).values_list("id", flat=True)
    )
    found = api.get(f"/api/v1/branches/{branch.pk}/chunks/", {"q": "automobile"}).json()
    assert any(FACT in r["text"] for r in found["results"])
    none = api.get(f"/api/v1/branches/{branch.pk}/chunks/", {"q": "zeppelin"}).json()
    assert none == {"results": []}
    bad = api.get(f"/api/v1/branches/{branch.pk}/chunks/", {"limit": "0"})
    assert bad.status_code == 400
    assert bad.json()["extra"] == {"field": "limit"}


def test_grep_semantic_mode_finds_chunks_by_meaning(api, conversation, settings):
    settings.LCM_CHUNK_TOPIC_SHIFT = 2.0
    append(conversation, FACT, "The quarterly report needs two more charts.")
    index_conversation_messages(conversation_id=conversation.pk)
    response = api.post(
        "/api/v1/grep/",
        {"query": "Where did we put the car?", "mode": "semantic"},
        format="json",
    )
    assert response.status_code == 200, response.content
    results = response.json()["results"]
    assert results[0]["type"] == "chunk"
    assert results[0]["snippet"] == FACT
    assert (results[0]["seq"], results[0]["seq_end"]) == (1, 1)


def test_grep_hybrid_mode_ranks_units_with_their_own_bm25_leg(api, conversation, settings):
    # Over messages, hybrid returns units (one per short message) ranked by BM25 fused
    # with the vectors: the two messages naming the boiler come before the one that does
    # not, and no whole-message full-text row spends the budget twice.
    append(conversation, FACT, "The weather was mild all week.", "The boiler room is locked.")
    index_conversation_messages(conversation_id=conversation.pk)
    response = api.post(
        "/api/v1/grep/", {"query": "boiler", "mode": "hybrid", "scope": "messages"}, format="json"
    )
    assert response.status_code == 200, response.content
    results = response.json()["results"]
    assert [r["type"] for r in results] == ["chunk", "chunk", "chunk"]
    assert sorted(r["seq"] for r in results[:2]) == [1, 3]
    assert results[2]["seq"] == 2
    assert all(r["seq"] == r["seq_end"] for r in results)
    scores = [r["score"] for r in results]
    assert scores == sorted(scores, reverse=True)


def test_grep_refuses_semantic_mode_over_files(api):
    response = api.post(
        "/api/v1/grep/", {"query": "x", "mode": "semantic", "scope": "files"}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["extra"] == {"field": "scope"}
    unknown = api.post("/api/v1/grep/", {"query": "x", "mode": "vibes"}, format="json")
    assert unknown.status_code == 400
    # refused by the request serializer (the API contract's field-error shape)
    assert list(unknown.json()["extra"]["fields"]) == ["mode"]


def test_grep_semantic_sees_only_the_callers_conversations(other_api, conversation):
    append(conversation, FACT)
    index_conversation_messages(conversation_id=conversation.pk)
    response = other_api.post(
        "/api/v1/grep/", {"query": "automobile crate", "mode": "semantic"}, format="json"
    )
    assert response.status_code == 200
    assert response.json() == {"results": []}
