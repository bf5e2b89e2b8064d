"""The default backend: WordLlama's `l2_supercat` static token embeddings (MIT), whose
weights (32,000 x 256 float32, 16 MB) and tokenizer ship inside the `wordllama` wheel.

We read the two bundled files directly (safetensors + tokenizers) and mean-pool token
vectors ourselves, rather than calling `WordLlama.load()`: that loader looks for the
tokenizer under a directory the wheel does not ship and then tries to download it, and
importing `wordllama` configures the root logger. Nothing here touches the network.
"""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path

import numpy as np

from memory.embeddings.base import EmbeddingError, normalise

MODEL_NAME = "wordllama-l2-supercat-256"
DIM = 256
_MAX_TOKENS = 2048  # a chunk is at most ~800 tokens; longer texts are pooled over the head


def _package_dir() -> Path:
    spec = importlib.util.find_spec("wordllama")
    if spec is None or spec.origin is None:
        raise EmbeddingError("the wordllama package is not installed (pip install wordllama)")
    return Path(spec.origin).parent


class StaticWordLlama:
    name = MODEL_NAME
    dim = DIM

    # Raw cosine -> calibrated similarity (see docs/memory.md): floor maps to 0, ceiling to 1.
    similarity_floor = 0.0
    similarity_ceiling = 0.35

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._matrix: np.ndarray | None = None
        self._tokenizer = None

    def _load(self) -> None:
        with self._lock:
            if self._matrix is not None:
                return
            from safetensors.numpy import load_file
            from tokenizers import Tokenizer

            root = _package_dir()
            weights = root / "weights" / "l2_supercat_256.safetensors"
            vocab = root / "tokenizers" / "l2_supercat_tokenizer_config.json"
            if not weights.exists() or not vocab.exists():
                raise EmbeddingError(f"wordllama's bundled model files are missing under {root}")
            tokenizer = Tokenizer.from_file(str(vocab))
            tokenizer.no_padding()
            tokenizer.enable_truncation(_MAX_TOKENS)
            matrix = load_file(str(weights))["embedding.weight"]
            self._tokenizer = tokenizer
            self._matrix = np.ascontiguousarray(matrix, dtype=np.float32)

    def embed(self, texts: list[str]) -> np.ndarray:
        if self._matrix is None:
            self._load()
        matrix, tokenizer = self._matrix, self._tokenizer
        assert matrix is not None and tokenizer is not None
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        last = matrix.shape[0] - 1
        for row, encoding in enumerate(tokenizer.encode_batch(texts, add_special_tokens=False)):
            if encoding.ids:
                ids = np.clip(np.asarray(encoding.ids, dtype=np.int64), 0, last)
                out[row] = matrix[ids].mean(axis=0)
        return normalise(out)
