"""grep's `semantic` and `hybrid` modes (POST /api/v1/grep/), called by retrieval.grep.

What is searched follows grep's `scope`: `messages` searches chunks (the messages cut
into pieces; each hit names the message seq range it covers), `summaries` searches
compaction summaries (their vectors, see memory.summaries), `both` searches the two.

- semantic: chunks and summaries by meaning, one list ordered by calibrated similarity
  (one model, one namespace: the scores compare); below the similarity threshold is
  left out.
- hybrid: three ranked lists fused by reciprocal rank: the chunks of the hybrid
  retrieval (vector + full text over chunks), the summaries by vector, and grep's own
  full-text hits over messages and/or summaries (`full_text_rows`). A summary found by
  both its vector and full text is one row.

Rows have grep's shape. `type` says what a row is: `chunk` (id: a chunk id, with `seq`,
`seq_end`, `chunk_type`, and the passage a reader needs: `text`, `message_id`,
`start_offset`, `end_offset`; see add_passages), `summary` (id: `sum_…`, which describe and expand accept; with
`depth` and `kind`) or `message` (hybrid's full-text leg).
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from django.db.models import Q

from conversations.models import Message
from conversations.search import Scope
from memory.embeddings import embed_query
from memory.namespaces import backend_for_namespace, search_namespace
from memory.passages import passages_for
from memory.recall import search_units
from memory.summaries import search_summaries
from memory.turn_retrieval import RetrievalParams
from memory.vectors import ScopeFilter

SNIPPET_CHARS = 240
RRF_K = 60  # reciprocal rank fusion's constant (units fused with summaries)
KINDS = {"messages": ("chunk",), "summaries": ("summary",), "both": ("chunk", "summary")}


def scope_filter(scope: Scope) -> ScopeFilter:
    if scope.conversation_ids is not None:
        return ScopeFilter(conversations=tuple((c, None) for c in scope.conversation_ids))
    return ScopeFilter(owner_id=scope.owner_id)


def _snippet(text: str) -> str:
    return " ".join(text.split())[:SNIPPET_CHARS]


def grep_memory(
    *,
    scope: Scope,
    query: str,
    limit: int,
    mode: str,
    scope_name: str = "both",
    full_text_rows: Callable[[], list[dict]] | None = None,
) -> list[dict]:
    """grep rows for `mode` semantic or hybrid over the kinds `scope_name` names."""
    kinds = KINDS[scope_name]
    namespace = search_namespace()  # read once: chunks and summaries from one model
    if mode == "full_text":  # full-text grep's any-word fallback (retrieval.grep)
        return chunk_hits(scope=scope, query=query, limit=limit, mode=mode, namespace=namespace)
    params = RetrievalParams.from_settings(top_k=limit, overfetch_k=max(limit, 16))
    chunks = (
        chunk_hits(scope=scope, query=query, limit=limit, mode=mode, namespace=namespace)
        if "chunk" in kinds
        else []
    )
    summaries = (
        summary_hits(scope=scope, query=query, limit=limit, namespace=namespace, params=params)
        if "summary" in kinds
        else []
    )
    if mode == "semantic":
        ranked = sorted(chunks + summaries, key=lambda row: (-row["score"], str(row["id"])))
        return ranked[:limit]
    if "summary" not in kinds:
        # Messages only: the units' own ranking already fuses BM25 with the vectors
        # (memory.recall); whole-message full-text rows would spend a reader's budget on
        # long messages for what a passage holds.
        return chunks[:limit]
    text = full_text_rows() if full_text_rows is not None else []
    summary_text = [row for row in text if row["type"] == "summary"]
    return fuse([chunks, summaries, summary_text], limit)


def chunk_hits(*, scope: Scope, query: str, limit: int, mode: str, namespace=None) -> list[dict]:
    """Units (memory.recall) best first; `score` is the calibrated similarity in semantic
    mode, BM25 in full_text mode and the fused score (ranking only) in hybrid mode."""
    result = search_units(
        scope=scope_filter(scope),
        query=query,
        k=limit,
        mode=mode,
        namespace=namespace,
    )
    rows = [
        {
            "type": "chunk",
            "id": hit.chunk.pk,
            "conversation_id": hit.chunk.conversation_id,
            "created_at": hit.chunk.source_created_at,
            "snippet": _snippet(hit.chunk.rendered_text),
            "score": round(
                {"semantic": hit.similarity, "full_text": hit.bm25}.get(mode, hit.score), 4
            ),
            "seq": hit.chunk.seq_start,
            "seq_end": hit.chunk.seq_end,
            "chunk_type": hit.chunk.chunk_type,
        }
        for hit in result.hits
    ]
    if mode != "full_text":
        add_passages(
            rows,
            [hit.chunk for hit in result.hits],
            alone={hit.chunk.pk for hit in result.hits if hit.alone},
        )
    return rows


def add_passages(rows: list[dict], chunks: list, alone: Collection[str] = ()) -> None:
    """Give each chunk row (in `chunks`' order) what a reader needs to answer from it: `text`,
    its passage (memory.passages: the unit with its neighbours in the message, at most
    LCM_SEARCH_PASSAGE_TOKENS), `message_id` (the message it came from; null for a unit over
    several messages) and `start_offset`/`end_offset` (the passage's characters in that
    message's text). Keys added, none changed."""
    passages = passages_for(chunks, alone=alone)  # `alone`: no sibling to read (passages_for)
    message_ids = _message_ids(chunks)
    for row, chunk in zip(rows, chunks, strict=True):
        passage = passages[chunk.pk]
        row["text"] = passage.text
        row["message_id"] = message_ids.get((chunk.conversation_id, chunk.seq_start))
        row["start_offset"] = passage.start_offset
        row["end_offset"] = passage.end_offset


def _message_ids(chunks: list) -> dict[tuple[int, int], int]:
    """`{(conversation id, seq): message id}` of the single-message units among `chunks`."""
    wanted = {(c.conversation_id, c.seq_start) for c in chunks if c.seq_start == c.seq_end}
    if not wanted:
        return {}
    query = Q()
    for conversation_id in {c for c, _ in wanted}:
        query |= Q(
            conversation_id=conversation_id, seq__in={s for c, s in wanted if c == conversation_id}
        )
    rows = Message.objects.filter(query).values_list("conversation_id", "seq", "pk")
    return {(c, seq): pk for c, seq, pk in rows}


def summary_hits(
    *, scope: Scope, query: str, limit: int, namespace=None, params=None
) -> list[dict]:
    """Summaries by vector, best first, at or above the similarity threshold."""
    namespace = namespace or search_namespace()
    params = params or RetrievalParams.from_settings(top_k=limit)
    backend = backend_for_namespace(namespace)
    hits = search_summaries(
        namespace=namespace,
        backend=backend,
        query_vector=embed_query(backend, query),
        scope=scope_filter(scope),
        k=limit,
    )
    return [
        {
            "type": "summary",
            "id": hit.summary.pk,
            "conversation_id": hit.summary.conversation_id,
            "created_at": hit.summary.created_at,
            "snippet": _snippet(hit.summary.content),
            "score": round(hit.similarity, 4),
            "depth": hit.summary.depth,
            "kind": hit.summary.kind,
        }
        for hit in hits
        if hit.similarity >= params.threshold
    ]


def fuse(ranked_lists: list[list[dict]], limit: int) -> list[dict]:
    """Reciprocal rank fusion of ranked lists; `score` becomes the fused score. Rows of
    the same (type, id) merge (the first list's row is kept)."""
    fused: dict[tuple[str, str], tuple[float, dict]] = {}
    for ranked in ranked_lists:
        for rank, row in enumerate(ranked, start=1):
            key = (row["type"], str(row["id"]))
            score, kept = fused.get(key, (0.0, row))
            fused[key] = (score + 1.0 / (RRF_K + rank), kept)
    ordered = sorted(fused.values(), key=lambda pair: (-pair[0], str(pair[1]["id"])))[:limit]
    return [{**row, "score": round(score, 6)} for score, row in ordered]
