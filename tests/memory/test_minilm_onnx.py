"""all-MiniLM-L6-v2 through ONNX Runtime: the same vectors as the numpy forward pass, the
graph cached under the data directory and rebuilt when it does not match its hash, and the
numpy fallback when the runtime is missing. Nothing here downloads: the graph is built
from the weights the product installs."""

from __future__ import annotations

import hashlib
import logging
import random
import sys

import numpy as np
import pytest

import memory.embeddings as embeddings
from memory.embeddings import EmbeddingError, backend_for
from memory.embeddings.minilm_cache import ensure_graph
from memory.embeddings.minilm_files import MAX_TOKENS, load_tokenizer
from memory.embeddings.minilm_numpy import MiniLMNumpy
from memory.embeddings.minilm_onnx import MiniLMOnnx
from memory.models import EmbeddingNamespace
from memory.namespaces import backend_for_namespace

# The stated tolerance between the two paths (docs/memory.md): both compute the tanh GELU
# (the graph's FastGelu), so they differ by float rounding only (measured: cosine >= 0.999999,
# largest component difference 3e-7).
MIN_COSINE = 0.9999
MAX_COMPONENT_DIFF = 1e-3

_VOCABULARY = (
    "the a we you it is was to of and in on for with deploy server config error retry "
    "timeout database index query vector memory session agent tool output file line "
    "function return value test failed passed build commit branch merge review release "
    "Paris Tuesday invoice 2024 3.14 42 user@example.com /var/log/app.log def class import "
    "{ } ( ) [ ] = == -> :: ; , . ! ? \" ' café naïve 東京 emoji 🙂 don't can't it's"
)
_WORDS = _VOCABULARY.split()


def _texts(count: int, seed: int = 33) -> list[str]:
    """Short chat lines mostly, some paragraphs, a few past the 256-token cut (kept few:
    the numpy path takes a second per few long texts on a busy machine)."""
    rng = random.Random(seed)
    texts = []
    for i in range(count):
        if i % 50 == 0:
            words = rng.randint(200, 260)  # beyond MAX_TOKENS: the cut
        elif i % 10 == 0:
            words = rng.randint(20, 60)
        else:
            words = rng.randint(1, 12)
        texts.append(" ".join(rng.choice(_WORDS) for _ in range(words)))
    return texts


@pytest.fixture(scope="module")
def graph_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("graph")


def test_the_runtime_and_numpy_give_the_same_vectors(settings, graph_dir):
    settings.DATA_DIR = graph_dir
    texts = _texts(300) + ["", "   "]
    lengths = [len(e.ids) for e in load_tokenizer().encode_batch(texts)]
    assert max(lengths) == MAX_TOKENS and min(lengths) <= 3  # short and cut texts both
    runtime = MiniLMOnnx().embed(texts)
    reference = MiniLMNumpy().embed(texts)
    assert runtime.shape == reference.shape == (302, 384)
    assert runtime.dtype == np.float32
    assert not runtime[-2:].any()  # empty text: a zero row, as numpy gives
    cosines = (runtime[:-2] * reference[:-2]).sum(axis=1)
    assert cosines.min() >= MIN_COSINE
    assert np.abs(runtime - reference).max() <= MAX_COMPONENT_DIFF
    assert np.allclose(np.linalg.norm(runtime[:-2], axis=1), 1.0, atol=1e-5)


def _sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_cached_graph_that_does_not_match_its_hash_is_rebuilt(settings, graph_dir, caplog):
    settings.DATA_DIR = graph_dir
    path = ensure_graph("fp32")
    assert path.parent == graph_dir / "models"
    recorded = path.with_name(path.name + ".sha256").read_text().strip()
    assert _sha256(path) == recorded
    with caplog.at_level(logging.INFO, logger="lcm.memory"):
        assert ensure_graph("fp32") == path  # a matching file is used as it is
    assert not caplog.records

    path.write_bytes(path.read_bytes()[:1000])  # a truncated copy
    with caplog.at_level(logging.INFO, logger="lcm.memory"):
        assert ensure_graph("fp32") == path
    assert "does not match its hash" in caplog.text
    assert _sha256(path) == recorded  # rebuilt, and the build is deterministic


def test_without_the_runtime_minilm_runs_in_numpy_with_one_log_line(monkeypatch, caplog):
    monkeypatch.setattr(embeddings, "_cache", {})  # a process that never loaded a backend
    monkeypatch.setattr(embeddings, "_resolutions", {})
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import fails: not installed
    with caplog.at_level(logging.INFO, logger="lcm.memory"):
        backend = backend_for("minilm")
        assert backend_for("minilm") is backend
    assert isinstance(backend, MiniLMNumpy)
    assert backend.name == "all-MiniLM-L6-v2"  # not the int8 default: numpy's fp32 vectors
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert "runs in numpy" in caplog.records[0].getMessage()
    with pytest.raises(EmbeddingError, match="needs onnxruntime"):
        backend_for("minilm", "int8")


def test_the_int8_graph_is_the_default_and_a_model_of_its_own():
    fp32, int8 = backend_for("minilm", "fp32"), backend_for("minilm", "int8")
    assert backend_for("minilm") is int8 and backend_for("auto") is int8
    assert isinstance(fp32, MiniLMOnnx) and isinstance(int8, MiniLMOnnx)
    assert fp32.name == MiniLMNumpy.name == "all-MiniLM-L6-v2"  # same vectors, same namespace
    assert int8.name == "all-MiniLM-L6-v2-int8"
    namespace = EmbeddingNamespace(model="all-MiniLM-L6-v2-int8", dim=384)
    assert backend_for_namespace(namespace) is int8
    with pytest.raises(EmbeddingError, match="variant"):
        backend_for("minilm", "fp16")
