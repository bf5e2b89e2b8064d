"""index_turn, retrieve_for_turn and manual attachments on real turns (offline provider)."""

import pytest

from core.api.errors import InvalidInput
from memory.indexing import index_turn
from memory.models import (
    Chunk,
    ChunkVector,
    EmbeddingNamespace,
    NamespaceStatus,
    Retrieval,
    RetrievalStats,
)
from memory.turn_retrieval import items_for_chunk_ids, retrieve_for_turn
from tests.memory.helpers import run_turn
from turns.branches import branch_fork
from turns.jobs import commit_pending

pytestmark = pytest.mark.django_db

FACT = "Note for later: the automobile is stored in the green crate beside the boiler."


def test_index_turn_chunks_the_mirrored_turn_once(chat):
    turn = run_turn(chat, FACT)
    first = index_turn(turn_id=turn.id)
    assert first.chunks_created >= 1
    chunks = list(Chunk.objects.filter(source_turn=turn))
    assert len(chunks) == first.chunks_created
    assert {c.source_key for c in chunks} == {f"turn:{turn.id}"}
    assert {(c.session_id, c.branch_id) for c in chunks} == {(chat.pk, turn.branch_id)}
    assert any(FACT in c.rendered_text for c in chunks)
    assert ChunkVector.objects.filter(chunk__in=chunks).count() == len(chunks)

    again = index_turn(turn_id=turn.id)  # a retried or reconciled job
    assert (again.chunks_created, again.vectors_created) == (0, 0)
    assert Chunk.objects.filter(source_turn=turn).count() == len(chunks)


@pytest.mark.embedding_model
def test_retrieve_for_turn_finds_an_earlier_turn_and_stores_rows_and_stats(chat):
    first = run_turn(chat, FACT)
    index_turn(turn_id=first.id)
    second = run_turn(chat, "Where did we put the car?")
    items = retrieve_for_turn(turn=second, query="Where did we put the car?", budget_tokens=4000)
    assert items, items.stats
    assert FACT in items[0].text
    assert items[0]["id"] == items[0].chunk_id
    assert items.stats["disabled"] is False
    assert items.stats["selected"] >= 1
    rows = list(Retrieval.objects.filter(turn=second).order_by("rank"))
    assert [r.chunk_id for r in rows if r.packed] == [i.chunk_id for i in items]
    assert rows[0].rank == 1
    stats = RetrievalStats.objects.get(turn=second)
    assert stats.disabled is False
    assert stats.selected == len(rows)
    assert stats.packed_tokens == items.stats["packed_tokens"] > 0
    assert stats.similarity_max >= stats.similarity_min

    # context_prepare may run again (a retry): the rows are replaced, not duplicated
    retrieve_for_turn(turn=second, query="Where did we put the car?", budget_tokens=4000)
    assert Retrieval.objects.filter(turn=second).count() == len(rows)


def test_an_embedding_failure_disables_retrieval_and_says_so(chat, monkeypatch):
    first = run_turn(chat, FACT)
    index_turn(turn_id=first.id)
    second = run_turn(chat, "Where did we put the car?")
    # The active namespace's model is the OpenAI API, and no key is set: embedding fails.
    EmbeddingNamespace.objects.update(status=NamespaceStatus.RETIRED)
    openai = EmbeddingNamespace.objects.create(
        model="openai:text-embedding-3-small", dim=1536, status=NamespaceStatus.ACTIVE
    )
    # its vectors exist (a finished re-index), so the search has units to rank and must
    # embed the query
    ChunkVector.objects.bulk_create(
        ChunkVector(namespace=openai, chunk=chunk, vector=bytes(4 * 1536))
        for chunk in Chunk.objects.filter(source_turn=first)
    )
    items = retrieve_for_turn(turn=second, query="Where did we put the car?", budget_tokens=4000)
    assert list(items) == []
    assert items.stats["disabled"] is True
    assert "OPENAI_API_KEY" in items.stats["error"]
    stats = RetrievalStats.objects.get(turn=second)
    assert (stats.disabled, stats.selected, stats.packed_tokens) == (True, 0, 0)
    assert "OPENAI_API_KEY" in stats.error
    assert Retrieval.objects.filter(turn=second).count() == 0


def test_a_fork_retrieves_its_ancestry_up_to_the_fork_point_only(chat):
    kept = run_turn(chat, FACT)
    index_turn(turn_id=kept.id)
    commit_pending(branch=kept.branch)
    later = run_turn(chat, "Note for later: the bicycle is locked at the station.")
    index_turn(turn_id=later.id)
    fork = branch_fork(branch=kept.branch, turn_id=kept.id)
    turn = run_turn(chat, "Where is the bike and where is the car?", branch=fork)
    items = retrieve_for_turn(
        turn=turn, query="Where is the bike and where is the car?", budget_tokens=4000
    )
    texts = " ".join(i.text for i in items)
    assert FACT in texts
    assert "bicycle" not in texts
    # on the original branch both are visible
    main_turn = run_turn(chat, "Where is the bike?", branch=kept.branch)
    main_items = retrieve_for_turn(turn=main_turn, query="Where is the bike?", budget_tokens=4000)
    assert any("bicycle" in i.text for i in main_items)


def test_attached_chunks_are_items_in_the_order_given_and_owner_checked(chat, other_user):
    turn = run_turn(chat, FACT)
    index_turn(turn_id=turn.id)
    ids = list(Chunk.objects.filter(source_turn=turn).values_list("id", flat=True))
    items = items_for_chunk_ids(list(reversed(ids)), chat.owner)
    assert [i.chunk_id for i in items] == list(reversed(ids))
    assert {i.packed_as for i in items} == {"attached"}
    with pytest.raises(InvalidInput) as refused:
        items_for_chunk_ids(ids, other_user)
    assert refused.value.extra["missing"] == ids
    with pytest.raises(InvalidInput):
        items_for_chunk_ids(["nope"], chat.owner)


@pytest.mark.embedding_model
def test_the_turn_context_carries_retrieved_memory(chat, settings):
    # The head state only, the first turn committed: the context does not hold it verbatim
    # (what it holds is never retrieved again: tests/turns/test_cache_as_served.py).
    settings.LCM_STATE_FOLD_TOKENS = 0
    first = run_turn(chat, FACT)
    commit_pending(branch=chat.active_branch)
    index_turn(turn_id=first.id)
    second = run_turn(chat, "Where did we put the car?")
    retrieved = second.context["retrieved"]
    assert any(FACT in item["text"] for item in retrieved)
    assert Retrieval.objects.filter(turn=second, packed=True).exists()


def test_attached_chunks_come_first_in_the_turn_context(chat):
    first = run_turn(chat, FACT)
    index_turn(turn_id=first.id)
    chunk_id = Chunk.objects.filter(source_turn=first).values_list("id", flat=True)[0]
    second = run_turn(chat, "Tell me about lunch plans.", attach_chunk_ids=[chunk_id])
    assert second.context["retrieved"][0]["id"] == chunk_id
