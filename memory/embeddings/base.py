"""The embedding backend interface: texts in, L2-normalised float32 rows out."""

from __future__ import annotations

from typing import Protocol

import numpy as np


class EmbeddingError(Exception):
    """The backend could not embed (model missing, API down, bad answer)."""


class EmbeddingBackend(Protocol):
    name: str  # the model name recorded on every vector (its namespace)
    dim: int
    similarity_floor: float  # raw cosine of unrelated texts, typically
    similarity_ceiling: float  # raw cosine of a close paraphrase, typically

    def embed(self, texts: list[str]) -> np.ndarray:
        """(len(texts), dim) float32, each row of unit length (a zero row for empty text)."""
        ...


def normalise(rows: np.ndarray) -> np.ndarray:
    rows = np.asarray(rows, dtype=np.float32)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return rows / norms


def calibrate(backend: EmbeddingBackend, cosine: float) -> float:
    """A model's raw cosine mapped linearly so that its floor is 0 and ceiling 1, making
    one threshold (LCM_RETRIEVAL_SIMILARITY_THRESHOLD) meaningful across models."""
    span = backend.similarity_ceiling - backend.similarity_floor
    return max(0.0, min(1.0, (cosine - backend.similarity_floor) / span))
