"""A deterministic, dependency-free backend: word and character-trigram feature hashing
into a fixed dimension (signed, L2-normalised). It matches shared words and spellings,
not meaning: a paraphrase that shares no word scores near zero. For tests and as a
last-resort offline fallback; the default is the bundled static model."""

from __future__ import annotations

import hashlib
import re

import numpy as np

from memory.embeddings.base import normalise

_WORD = re.compile(r"\w+", re.UNICODE)


class HashingEmbedding:
    # Raw cosine -> calibrated similarity (see docs/memory.md): floor maps to 0, ceiling to 1.
    similarity_floor = 0.0
    similarity_ceiling = 0.6

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.name = f"hashing-v1-{dim}"

    def _slot(self, feature: str) -> tuple[int, float]:
        digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        return value % self.dim, 1.0 if (value >> 63) & 1 else -1.0

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                slot, sign = self._slot("w:" + word)
                out[row, slot] += 2.0 * sign
                padded = f"#{word}#"
                for i in range(len(padded) - 2):
                    slot, sign = self._slot("c:" + padded[i : i + 3])
                    out[row, slot] += sign
        return normalise(out)
