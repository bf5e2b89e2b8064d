"""Embeddings through the OpenAI API (official SDK), used only when chosen by
LCM_EMBEDDING_BACKEND=openai and OPENAI_API_KEY is set. OPENAI_BASE_URL points the SDK
elsewhere (the tests use a local fake /v1/embeddings server)."""

from __future__ import annotations

import os

import numpy as np

from memory.embeddings.base import EmbeddingError, normalise

DIMS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
_BATCH = 256


class OpenAIEmbedding:
    similarity_floor = 0.1
    similarity_ceiling = 0.6

    def __init__(self, model: str, dim: int | None = None) -> None:
        self.name = f"openai:{model}"
        self.model = model
        self.dim = dim or DIMS.get(model, 1536)
        self._client = None

    def _get_client(self):
        if self._client is None:
            key = os.environ.get("OPENAI_API_KEY")
            if not key:
                raise EmbeddingError("OPENAI_API_KEY is not set (LCM_EMBEDDING_BACKEND=openai)")
            import openai

            self._client = openai.OpenAI(
                api_key=key, base_url=os.environ.get("OPENAI_BASE_URL") or None, max_retries=2
            )
        return self._client

    def embed(self, texts: list[str]) -> np.ndarray:
        import openai

        client = self._get_client()
        rows: list[list[float]] = []
        try:
            for start in range(0, len(texts), _BATCH):
                batch = [t if t.strip() else " " for t in texts[start : start + _BATCH]]
                answer = client.embeddings.create(model=self.model, input=batch)
                ordered = sorted(answer.data, key=lambda item: item.index)
                rows.extend(item.embedding for item in ordered)
        except openai.OpenAIError as error:
            raise EmbeddingError(f"OpenAI embeddings failed: {error}") from error
        matrix = np.asarray(rows, dtype=np.float32)
        if matrix.shape != (len(texts), self.dim):
            raise EmbeddingError(
                f"OpenAI embeddings answered shape {matrix.shape}, expected {(len(texts), self.dim)}"
            )
        return normalise(matrix)
