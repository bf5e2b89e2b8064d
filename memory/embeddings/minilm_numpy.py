"""all-MiniLM-L6-v2 in plain numpy: the fallback when onnxruntime is not installed.

The same files as the runtime backend (memory/embeddings/minilm_files.py) and the same
pipeline: embeddings + 6 post-LayerNorm transformer layers (GELU), attention-masked mean
pooling, L2 normalisation, with the tanh GELU the runtime's graph uses too (FastGelu).
Its vectors differ from the runtime's fp32 ones by float rounding, within the tolerance
tests/memory/test_minilm_onnx.py checks; both are recorded as the same model.
"""

from __future__ import annotations

import math
import threading

import numpy as np

from memory.embeddings.base import normalise
from memory.embeddings.minilm_files import (
    DIM,
    EPS,
    HEADS,
    LAYERS,
    MODEL_NAME,
    length_sorted_batches,
    load_tokenizer,
    load_weights,
    padded,
)

_BATCH = 32


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + EPS) * weight + bias


_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)


def _gelu(x: np.ndarray) -> np.ndarray:
    # BERT's erf GELU in its tanh form (< 1e-3 apart; numpy has no vectorised erf), as the
    # runtime's graph computes it (FastGelu).
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
            from memory.embeddings.blas import limit_blas_threads

            limit_blas_threads()  # see memory/embeddings/blas.py

            tokenizer = load_tokenizer()
            weights = load_weights()
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
        encodings = [encoding.ids for encoding in self._tokenizer.encode_batch(texts)]
        # Batch texts of similar length together (less padding).
        for rows in length_sorted_batches([len(ids) for ids in encodings], _BATCH):
            out[rows] = self._forward([encodings[i] for i in rows])
        out = normalise(out)
        out[[i for i, text in enumerate(texts) if not text.strip()]] = 0.0  # no content
        return out

    def _forward(self, batch: list[list[int]]) -> np.ndarray:
        w = self._w
        assert w is not None
        ids, int_mask = padded(batch)
        mask = int_mask.astype(np.float32)
        length = ids.shape[1]
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:length][None, :, :]
            + w["embeddings.token_type_embeddings.weight"][0][None, None, :]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        bias = ((1.0 - mask) * -1e4).astype(np.float32)[:, None, None, :]
        head = DIM // HEADS
        n, t = len(batch), length
        x = x.reshape(n * t, DIM)  # dense layers as one 2-D GEMM each (3-D matmul is slower)
        for layer in range(LAYERS):
            p = f"encoder.layer.{layer}."

            def dense(v, name, p=p):
                return v @ w[p + name + ".weight"] + w[p + name + ".bias"]

            def heads(v):
                return v.reshape(n, t, HEADS, head).transpose(0, 2, 1, 3)

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
