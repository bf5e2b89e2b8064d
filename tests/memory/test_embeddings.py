"""The embedding backends: bundled offline models, hashing, and the OpenAI API through
the real SDK against a local fake /v1/embeddings server."""

import numpy as np
import pytest

from memory.embeddings import EmbeddingError, backend_for
from memory.embeddings.openai_api import OpenAIEmbedding
from tests.memory.fake_embeddings_api import FakeEmbeddingsAPI, embeddings_answer


@pytest.mark.parametrize(
    ("kind", "name", "dim"),
    [
        ("minilm", "all-MiniLM-L6-v2-int8", 384),
        ("static", "wordllama-l2-supercat-256", 256),
        ("hashing", "hashing-v1-256", 256),
    ],
)
def test_local_backends_give_unit_vectors_that_know_a_paraphrase(kind, name, dim):
    backend = backend_for(kind)
    assert (backend.name, backend.dim) == (name, dim)
    vectors = backend.embed(
        ["The cat sat on the mat.", "A cat was sitting on the mat.", "Quarterly tax filing", ""]
    )
    assert vectors.shape == (4, dim)
    assert vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors[:3], axis=1), 1.0, atol=1e-5)
    assert not vectors[3].any()  # empty text: a zero row
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]


def test_the_minilm_fp32_graph_is_deterministic_and_batch_independent():
    backend = backend_for("minilm", "fp32")
    one = backend.embed(["Where did we put the car?"])
    many = backend.embed(["something much longer " * 20, "Where did we put the car?", "x"])
    assert np.allclose(one[0], many[1], atol=1e-5)


def test_the_int8_default_is_deterministic_and_close_to_batch_independent():
    """The int8 graph quantizes activations with one scale per batch, so a text's vector
    moves a little with its batch (docs/memory.md: cosine >= 0.96 measured); the same
    batch always gives the same vectors."""
    backend = backend_for("minilm")
    batch = ["something much longer " * 20, "Where did we put the car?", "x"]
    one = backend.embed(["Where did we put the car?"])
    many = backend.embed(batch)
    assert np.array_equal(many, backend.embed(batch))
    assert float(one[0] @ many[1]) > 0.95


def test_the_openai_backend_embeds_through_the_sdk(monkeypatch):
    with FakeEmbeddingsAPI(dim=16) as api:
        api.enqueue(embeddings_answer(api))
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-embeddings")
        monkeypatch.setenv("OPENAI_BASE_URL", api.base_url)
        backend = OpenAIEmbedding("text-embedding-3-small", dim=16)
        vectors = backend.embed(["alpha beta", "gamma"])
        request = api.requests[0]
    assert vectors.shape == (2, 16)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert (request.body["model"], request.body["input"]) == (
        "text-embedding-3-small",
        ["alpha beta", "gamma"],
    )
    assert request.headers["authorization"] == "Bearer sk-test-embeddings"


def test_the_openai_backend_reports_failures_as_embedding_errors(monkeypatch):
    with FakeEmbeddingsAPI(dim=16) as api:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-embeddings")
        monkeypatch.setenv("OPENAI_BASE_URL", api.base_url)
        api.enqueue(*[api.error_response(400, "invalid_request_error", "bad input")])
        with pytest.raises(EmbeddingError, match="OpenAI embeddings failed"):
            OpenAIEmbedding("text-embedding-3-small", dim=16).embed(["x"])
        api.enqueue(embeddings_answer(api))
        with pytest.raises(EmbeddingError, match="expected"):
            OpenAIEmbedding("text-embedding-3-small", dim=32).embed(["x"])


def test_the_openai_backend_needs_a_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(EmbeddingError, match="OPENAI_API_KEY"):
        OpenAIEmbedding("text-embedding-3-small").embed(["x"])


def test_the_static_model_loads_with_the_network_unreachable(monkeypatch):
    """The bundled files are read directly: no hub lookup even when offline mode is set."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from memory.embeddings.static_wordllama import StaticWordLlama

    assert StaticWordLlama().embed(["offline"]).shape == (1, 256)


def test_numpy_blas_runs_on_one_thread_once_limited(monkeypatch):
    """memory.embeddings.blas pins numpy's BLAS (through threadpoolctl) to one thread when
    the environment does not choose (this machine has 2 cores: the default is 2)."""
    from threadpoolctl import threadpool_info

    from memory.embeddings.blas import limit_blas_threads

    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    limit_blas_threads()  # a no-op when the model or the cache already did it
    blas = [info for info in threadpool_info() if info["user_api"] == "blas"]
    assert blas and [info["num_threads"] for info in blas] == [1] * len(blas)
