"""grep's `semantic` and `hybrid` modes (POST /api/v1/grep/), called by retrieval.grep.

- semantic: chunks ranked by the hybrid pipeline's vector leg (type "chunk", with the
  message seq range they cover);
- hybrid: the hybrid retrieval over chunks (vector + full text over chunks) fused by
  reciprocal rank with grep's own full-text hits over messages and/or summaries.

Summaries are not embedded: in semantic mode only chunks answer; in hybrid mode
summaries come from the full-text leg.
"""

from __future__ import annotations

from conversations.search import Scope
from memory.retrieval import RRF_K, RetrievalParams, hybrid_search
from memory.vectors import ScopeFilter

SNIPPET_CHARS = 240


def scope_filter(scope: Scope) -> ScopeFilter:
    if scope.conversation_ids is not None:
        return ScopeFilter(conversations=tuple((c, None) for c in scope.conversation_ids))
    return ScopeFilter(owner_id=scope.owner_id)


def chunk_hits(*, scope: Scope, query: str, limit: int, mode: str) -> list[dict]:
    params = RetrievalParams.from_settings(top_k=limit, overfetch_k=max(limit, 16))
    result = hybrid_search(
        scope=scope_filter(scope),
        query=query,
        mode="semantic" if mode == "semantic" else "hybrid",
        params=params,
    )
    return [
        {
            "type": "chunk",
            "id": c.chunk.pk,
            "conversation_id": c.chunk.conversation_id,
            "created_at": c.chunk.source_created_at,
            "snippet": " ".join(c.chunk.rendered_text.split())[:SNIPPET_CHARS],
            "score": round(c.similarity, 4),
            "seq": c.chunk.seq_start,
            "seq_end": c.chunk.seq_end,
            "chunk_type": c.chunk.chunk_type,
        }
        for c in result.candidates
    ]


def fuse(chunk_rows: list[dict], text_rows: list[dict], limit: int) -> list[dict]:
    """Reciprocal rank fusion of two ranked lists; `score` becomes the fused score."""
    fused: dict[tuple[str, str], tuple[float, dict]] = {}
    for ranked in (chunk_rows, text_rows):
        for rank, row in enumerate(ranked, start=1):
            key = (row["type"], str(row["id"]))
            score, _ = fused.get(key, (0.0, row))
            fused[key] = (score + 1.0 / (RRF_K + rank), row)
    ordered = sorted(fused.values(), key=lambda pair: -pair[0])[:limit]
    return [{**row, "score": round(score, 6)} for score, row in ordered]
