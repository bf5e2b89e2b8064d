"""The vector index implementations behind one interface."""

import numpy as np
import pytest
from django.db import connection

from memory.indexing import index_conversation_messages
from memory.namespaces import search_namespace
from memory.vectors import ScopeFilter, VectorIndexUnavailable, vector_index
from memory.vectors import pgvector as pgvector_module
from memory.vectors.numpy_exact import NumpyExactIndex
from tests.memory.helpers import append

pytestmark = pytest.mark.django_db

TEXTS = ["red apples in the basket", "a blue boat on the lake", "green tea with lemon"]


@pytest.fixture
def indexed(conversation, settings):
    settings.LCM_CHUNK_TOPIC_SHIFT = 2.0
    append(conversation, *TEXTS)
    index_conversation_messages(conversation_id=conversation.pk)
    return conversation


def _query(text: str) -> np.ndarray:
    from memory.namespaces import backend_for_namespace

    return backend_for_namespace(search_namespace()).embed([text])[0]


def test_numpy_search_is_exact_and_scoped(indexed, make_conversation, user, other_user):
    namespace = search_namespace()
    index = NumpyExactIndex()
    hits = index.search(
        namespace_id=namespace.pk,
        query=_query("a boat on a lake"),
        scope=ScopeFilter(conversations=((indexed.pk, None),)),
        k=3,
    )
    assert len(hits) == 3
    assert [h.similarity for h in hits] == sorted((h.similarity for h in hits), reverse=True)
    from memory.models import Chunk

    assert Chunk.objects.get(pk=hits[0].chunk_id).rendered_text == TEXTS[1]
    limited = index.search(
        namespace_id=namespace.pk,
        query=_query("a boat on a lake"),
        scope=ScopeFilter(conversations=((indexed.pk, 1),)),
        k=3,
    )
    assert [Chunk.objects.get(pk=h.chunk_id).seq_end for h in limited] == [1]
    assert (
        index.search(
            namespace_id=namespace.pk,
            query=_query("boat"),
            scope=ScopeFilter(owner_id=other_user.pk),
            k=3,
        )
        == []
    )
    mine = index.search(
        namespace_id=namespace.pk, query=_query("boat"), scope=ScopeFilter(owner_id=user.pk), k=5
    )
    assert len(mine) == 3


def test_the_cache_picks_up_new_vectors(indexed):
    namespace = search_namespace()
    index = NumpyExactIndex()
    scope = ScopeFilter(conversations=((indexed.pk, None),))
    assert len(index.search(namespace_id=namespace.pk, query=_query("x"), scope=scope, k=10)) == 3
    append(indexed, "a yellow kite in the wind")
    index_conversation_messages(conversation_id=indexed.pk)
    assert len(index.search(namespace_id=namespace.pk, query=_query("x"), scope=scope, k=10)) == 4


@pytest.mark.skipif(connection.vendor != "sqlite", reason="sqlite-vec is an SQLite extension")
def test_sqlite_vec_agrees_with_numpy_or_says_why_it_cannot_run(indexed, settings):
    settings.LCM_VECTOR_INDEX = "sqlite_vec"
    namespace = search_namespace()
    scope = ScopeFilter(conversations=((indexed.pk, None),))
    query = _query("a boat on a lake")
    exact = NumpyExactIndex().search(namespace_id=namespace.pk, query=query, scope=scope, k=3)
    try:
        hits = vector_index().search(namespace_id=namespace.pk, query=query, scope=scope, k=3)
    except VectorIndexUnavailable as error:  # this Python's sqlite3 cannot load extensions
        assert "can load extensions" in str(error)
        import sqlite3

        assert not hasattr(sqlite3.Connection, "enable_load_extension")
        return
    assert [h.chunk_id for h in hits] == [h.chunk_id for h in exact]
    assert np.allclose([h.similarity for h in hits], [h.similarity for h in exact], atol=1e-5)


@pytest.mark.skipif(connection.vendor != "sqlite", reason="sqlite-vec is an SQLite extension")
def test_sqlite_vec_without_its_package_says_which_extra_to_install(indexed, settings, monkeypatch):
    """sqlite-vec is an optional extra: chosen but not installed, the index says so."""
    import sys

    monkeypatch.setitem(sys.modules, "sqlite_vec", None)  # what `import` sees when missing
    settings.LCM_VECTOR_INDEX = "sqlite_vec"
    scope = ScopeFilter(conversations=((indexed.pk, None),))
    with pytest.raises(VectorIndexUnavailable, match=r"lcm-server\[sqlite-vec\]"):
        vector_index().search(
            namespace_id=search_namespace().pk, query=_query("boat"), scope=scope, k=3
        )


def test_pgvector_is_detected_not_assumed(settings):
    settings.LCM_VECTOR_INDEX = "pgvector"
    if connection.vendor == "postgresql" and pgvector_module.available():
        assert vector_index().name == "pgvector"
        return
    with pytest.raises(VectorIndexUnavailable, match="vector extension"):
        vector_index()
