"""The per-process LRU of query vectors: keyed by model and text, bounded."""

import numpy as np

from memory import embeddings
from memory.embeddings import backend_for, embed_query


def test_a_repeated_query_reuses_its_vector_and_models_do_not_share(monkeypatch):
    embeddings.clear_query_cache()
    hashing = backend_for("hashing", "256")
    first = embed_query(hashing, "where is the car")
    assert embed_query(hashing, "where is the car") is first
    assert not first.flags.writeable
    np.testing.assert_allclose(first, hashing.embed(["where is the car"])[0])
    other = backend_for("hashing", "128")
    assert embed_query(other, "where is the car").shape == (128,)


def test_the_cache_is_bounded(monkeypatch):
    embeddings.clear_query_cache()
    monkeypatch.setattr(embeddings, "QUERY_CACHE_SIZE", 3)
    hashing = backend_for("hashing", "256")
    kept = embed_query(hashing, "q0")
    for i in range(1, 4):
        embed_query(hashing, f"q{i}")
    assert len(embeddings._query_cache) == 3
    assert embed_query(hashing, "q0") is not kept  # evicted, embedded again
