"""A model change: a new namespace built in the background with progress, searches kept on
the old one until the swap, never mixing the two."""

import pytest

from memory.indexing import index_conversation_messages
from memory.models import ChunkVector, EmbeddingNamespace, NamespaceStatus
from memory.namespaces import model_change_start, search_namespace
from memory.recall import search_units
from memory.reindex import reindex_namespace
from memory.turn_retrieval import RetrievalParams, turn_search
from memory.vectors import ScopeFilter
from tests.memory.helpers import append

pytestmark = [pytest.mark.django_db, pytest.mark.embedding_model]  # from the default model


def test_a_model_change_reindexes_with_progress_and_swaps_at_the_end(conversation, settings):
    settings.LCM_CHUNK_TOPIC_SHIFT = 2.0
    append(conversation, "alpha fact about the garden shed", "beta fact about the red car")
    index_conversation_messages(conversation_id=conversation.pk)
    old = search_namespace()
    assert old.model == "all-MiniLM-L6-v2-int8"

    settings.LCM_EMBEDDING_BACKEND = "hashing"
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "sync": False}
    building = model_change_start()  # queues the job (not run here)
    assert (building.model, building.dim, building.status) == (
        "hashing-v1-256",
        256,
        NamespaceStatus.BUILDING,
    )
    # while it builds, new chunks go into both namespaces; searches read the old one only
    append(conversation, "gamma fact about the blue boat")
    index_conversation_messages(conversation_id=conversation.pk)
    assert ChunkVector.objects.filter(namespace=old).count() == 3
    assert ChunkVector.objects.filter(namespace=building).count() == 1
    scope = ScopeFilter(conversations=((conversation.pk, None),))
    during = search_units(scope=scope, query="red car", k=6)
    assert during.stats["namespace"] == "all-MiniLM-L6-v2-int8/384"

    done = reindex_namespace(namespace_id=building.pk, batch=1)
    assert (done.status, done.chunks_total, done.chunks_done) == (NamespaceStatus.ACTIVE, 3, 3)
    assert done.progress == 1.0
    assert EmbeddingNamespace.objects.get(pk=old.pk).status == NamespaceStatus.RETIRED
    after = search_units(scope=scope, query="red car", k=6)
    assert after.stats["namespace"] == "hashing-v1-256/256"
    assert after.hits[0].chunk.rendered_text == "beta fact about the red car"
    # re-running is a no-op
    reindex_namespace(namespace_id=building.pk)
    assert ChunkVector.objects.filter(namespace=building).count() == 3


def test_no_model_change_means_no_new_namespace(conversation):
    append(conversation, "one")
    index_conversation_messages(conversation_id=conversation.pk)
    assert model_change_start() is None
    assert EmbeddingNamespace.objects.count() == 1


def test_indexing_after_a_model_change_starts_the_reindex_by_itself(
    conversation, settings, django_capture_on_commit_callbacks
):
    settings.LCM_CHUNK_TOPIC_SHIFT = 2.0
    append(conversation, "first fact about the shed")
    index_conversation_messages(conversation_id=conversation.pk)
    settings.LCM_EMBEDDING_BACKEND = "hashing"
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "sync": True}  # the queued job runs inline
    append(conversation, "second fact about the boat")
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        index_conversation_messages(conversation_id=conversation.pk)
    assert len(callbacks) == 1
    active = search_namespace()
    assert (active.model, active.chunks_done, active.chunks_total) == ("hashing-v1-256", 2, 2)
    assert ChunkVector.objects.filter(namespace=active).count() == 2


def test_the_command_shows_namespaces_and_progress(conversation, capsys):
    from django.core.management import call_command

    append(conversation, "one")
    index_conversation_messages(conversation_id=conversation.pk)
    call_command("lcm_memory")
    out = capsys.readouterr().out
    assert "configured model: all-MiniLM-L6-v2-int8/384" in out
    assert "chunks: 1" in out
    assert "all-MiniLM-L6-v2-int8/384 active" in out


def test_searches_stay_on_the_old_model_throughout_a_reindex(conversation, settings):
    """After every batch of the re-index, grep and retrieval still answer from the old
    namespace with exactly the answers they gave before it started; the swap is atomic."""
    settings.LCM_CHUNK_TOPIC_SHIFT = 2.0
    append(
        conversation,
        "alpha fact about the garden shed",
        "beta fact about the red car",
        "gamma fact about the blue boat",
        "delta fact about the old piano",
    )
    index_conversation_messages(conversation_id=conversation.pk)
    scope = ScopeFilter(conversations=((conversation.pk, None),))
    loose = RetrievalParams.from_settings(threshold=0.0)

    def answers():
        result = turn_search(scope=scope, query="automobile", params=loose)
        return result.stats["namespace"], [item.chunk_id for item in result.items]

    before = answers()
    settings.LCM_EMBEDDING_BACKEND = "hashing"
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "sync": False}
    building = model_change_start()
    seen = []

    def check(namespace):
        seen.append((namespace.chunks_done, namespace.chunks_total))
        assert answers() == before

    reindex_namespace(namespace_id=building.pk, batch=1, on_batch=check)
    assert seen == [(0, 4), (1, 4), (2, 4), (3, 4), (4, 4)]
    namespace, _ = answers()
    assert namespace == "hashing-v1-256/256"


def test_the_reindex_command_shows_progress_and_resumes(conversation, settings, capsys):
    from django.core.management import call_command

    settings.LCM_CHUNK_TOPIC_SHIFT = 2.0
    append(conversation, "one fact", "two fact", "three fact")
    index_conversation_messages(conversation_id=conversation.pk)
    settings.LCM_EMBEDDING_BACKEND = "hashing"
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "sync": False}
    building = model_change_start()
    # a run that stopped after one chunk
    from memory.reindex import reindex_namespace as run

    class Stop(Exception):
        pass

    def stop_after_first(namespace):
        if namespace.chunks_done == 1:
            raise Stop

    with pytest.raises(Stop):
        run(namespace_id=building.pk, batch=1, on_batch=stop_after_first)
    assert ChunkVector.objects.filter(namespace=building).count() == 1
    assert search_namespace().model == "all-MiniLM-L6-v2-int8"

    call_command("lcm_memory", "reindex", "--wait", "--batch", "1")
    captured = capsys.readouterr()
    assert "hashing-v1-256/256: active, 100%" in captured.out
    assert "Re-indexing into hashing-v1-256: 3/3 (100%)" in captured.err
    assert ChunkVector.objects.filter(namespace=building).count() == 3
    assert search_namespace().pk == building.pk


def test_the_command_moves_a_store_of_numpy_vectors_to_the_int8_default(
    conversation, settings, capsys
):
    """A store indexed before int8 became the default (fp32: numpy's vectors) moves to it
    with `lcm_memory reindex --wait`: every vector re-embedded with the quantized graph,
    close to the old one, and search answers from the new namespace."""
    import numpy as np
    from django.core.management import call_command

    settings.LCM_CHUNK_TOPIC_SHIFT = 2.0
    settings.LCM_EMBEDDING_MODEL = "fp32"
    append(conversation, "the spare key is under the blue flower pot", "lunch was pasta")
    index_conversation_messages(conversation_id=conversation.pk)
    old = search_namespace()
    assert old.model == "all-MiniLM-L6-v2"

    settings.LCM_EMBEDDING_MODEL = ""  # the default again: int8
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "sync": False}
    assert model_change_start().model == "all-MiniLM-L6-v2-int8"
    call_command("lcm_memory", "reindex", "--wait")
    assert "Re-indexing into all-MiniLM-L6-v2-int8: 2/2 (100%)" in capsys.readouterr().err
    new = search_namespace()
    assert new.model == "all-MiniLM-L6-v2-int8"

    def vectors(namespace):
        rows = ChunkVector.objects.filter(namespace=namespace).order_by("chunk_id")
        return np.stack([np.frombuffer(row.vector, dtype="<f4") for row in rows])

    assert (vectors(old) * vectors(new)).sum(axis=1).min() > 0.97
    scope = ScopeFilter(conversations=((conversation.pk, None),))
    found = search_units(scope=scope, query="where is the door key hidden", k=1, mode="semantic")
    assert found.stats["namespace"] == "all-MiniLM-L6-v2-int8/384"
    assert "flower pot" in found.hits[0].chunk.rendered_text
