"""Search for recall per token (grep's semantic/hybrid modes over messages, `memory_search`,
the retrieve API): units ranked by a z-score fusion of BM25 and cosine, smoothed over
neighbours, one unit per message (docs/memory.md, "Recall").

- Units (memory.chunker.unit_segments): a short message is one unit, a long one is cut
  into its sentences (LCM_MEMORY_UNIT_TOKENS, 24, sets the sizes); a hit costs its own
  tokens and names its message.
- The lexical leg is a BM25 of our own (k1 1.2, b 0.75) over the units' stored terms
  (memory.lexical: any word, stop words out, Snowball stems), its IDF and mean length taken
  over the units in scope. The same scorer runs on SQLite and PostgreSQL.
- The semantic leg is the cosine of the bundled model's vectors (the per-process matrix of
  memory.vectors.numpy_exact, which keeps the terms too).
- Fusion: each leg is standardised over the units in scope (z-score) and summed with
  weights LCM_SEARCH_BM25_WEIGHT and 1 - that (hybrid); semantic uses the cosine alone,
  full_text BM25 alone (units with at least one query term).
- Neighbours: a unit gains LCM_SEARCH_NEIGHBOUR_WEIGHT times the fused scores of the units
  before and after it in its conversation (evidence sits in runs of messages).
- Time: every hit carries its unit's `source_created_at` (grep shows it as `created_at`).
  A bonus for units written in a month the question names measured no gain on either
  dataset and is not applied (docs/benchmarks.md).
- Hybrid ranks messages (memory.message_rank, issue 34): each message by its best unit plus
  its whole-text BM25, the lexical leg scaled by its confidence and capped, neighbours
  lending only their semantic evidence.
- A question naming one of a transcript's speakers prefers that speaker's messages
  (memory.speaker_focus, LCM_SEARCH_SPEAKER_WEIGHT; issue 47, multi-hop).
- One unit per message: only a message's best unit is returned (the caller widens it with
  the message, its neighbours or lcm_expand when its budget allows).
- A question about the order of events (memory.event_order) is searched by its topic,
  over the user's messages when it asks what "I" brought up, and its messages are taken
  spread over the sessions (issue 47).

No similarity threshold, recency boost or MMR here: they serve turn injection
(memory.turn_retrieval.retrieve_for_turn) and cost recall in search (docs/memory.md).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from core.api.errors import InvalidInput
from memory.archived_unit_text import hydrate_chunks
from memory.embeddings import calibrate, embed_query
from memory.event_order import (
    about_own_words,
    ordering_question,
    sessions_of,
    spread_by_session,
    topic_of,
)
from memory.lexical import query_terms, speakers_named
from memory.message_rank import (
    Messages,
    RankParams,
    best_units,
    lexical_scale,
    message_bm25,
    message_groups,
    message_scores,
    top_messages,
)
from memory.models import Chunk, EmbeddingNamespace
from memory.namespaces import backend_for_namespace, search_namespace
from memory.passages import passages_for
from memory.retrieved_items import RetrievedItem, item_for_chunk
from memory.speaker_focus import speaker_focus
from memory.vectors.base import ScopeFilter
from memory.vectors.numpy_exact import INDEX, UnitMatrix

K1, B = 1.2, 0.75
MODES = ("hybrid", "semantic", "full_text")


@dataclass
class UnitHit:
    chunk: Chunk
    score: float  # the fused, smoothed score (comparable within one search only)
    cosine: float
    similarity: float  # the cosine through the model's calibration
    bm25: float
    matched_by: str  # vector | full_text | both
    alone: bool = False  # its message has no other unit: its passage is itself


@dataclass
class UnitSearch:
    hits: list[UnitHit]
    stats: dict


def _z(values: np.ndarray) -> np.ndarray:
    std = float(values.std())
    if std <= 1e-12:
        return np.zeros_like(values)
    return (values - float(values.mean())) / std


def _semantic_z(cosine: np.ndarray) -> np.ndarray:
    """The semantic leg's z-scores. A lexical-only unit (the middle of a long tool output,
    memory.tool_output_policy) has a zero vector: its cosine of exactly 0 says nothing, so
    it is left out of the mean and spread and scores 0 (neutral), instead of a low z that
    would also widen its message's spread (memory.message_rank's long-message term)."""
    unembedded = cosine == 0.0
    if not unembedded.any():
        return _z(cosine)
    out = np.zeros_like(cosine)
    embedded = ~unembedded
    if embedded.sum() > 1:
        out[embedded] = _z(cosine[embedded])
    return out


def bm25_scores(
    matrix: UnitMatrix, rows: np.ndarray, local: np.ndarray, n: int, terms: list[str]
) -> np.ndarray:
    """BM25 of each of `rows` (matrix rows in scope; `local` maps a row to its position
    there, -1 out of scope) for `terms`, IDF and mean length over those rows."""
    m = rows.size
    scores = np.zeros(m, dtype=np.float64)
    if not terms or m == 0:
        return scores
    lengths = matrix.doclen[:n]
    average = float(lengths[rows].mean()) or 1.0
    for term in terms:
        hit_rows, tfs = matrix.inverted.postings(term, n)
        if hit_rows.size == 0:
            continue
        at = local[hit_rows]
        keep = at >= 0
        if not keep.any():
            continue
        at, tf = at[keep], tfs[keep]
        df = at.size
        idf = math.log(1 + (m - df + 0.5) / (df + 0.5))
        norm = K1 * (1 - B + B * lengths[hit_rows[keep]] / average)
        scores[at] += idf * tf * (K1 + 1) / (tf + norm)
    return scores


def _neighbour_sum(
    matrix: UnitMatrix, rows: np.ndarray, local: np.ndarray, n: int, values: np.ndarray
) -> np.ndarray:
    """For each row in scope, the values of the units just before and after it in its
    conversation (0 where that neighbour is missing or out of scope)."""
    padded = np.append(values, 0.0)  # a missing neighbour reads the 0 at the end
    before, after = _neighbour_reads(matrix, rows, local, n)
    total = padded[before]
    total += padded[after]
    return total


def _neighbour_reads(
    matrix: UnitMatrix, rows: np.ndarray, local: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """The neighbour positions with -1 (none) turned into one past the end; kept with the
    scope (memory.vectors.numpy_exact.UnitMatrix.scope_extra)."""
    extra = matrix.scope_extra(rows)
    if extra is not None and "neighbour_reads" in extra:
        return extra["neighbour_reads"]
    found = tuple(
        np.where(at >= 0, at, rows.size).astype(np.int32)
        for at in matrix.neighbour_positions(rows, local, n)
    )
    if extra is not None:
        extra["neighbour_reads"] = found
    return found


def _cosines(matrix: UnitMatrix, rows: np.ndarray, n: int, vector: np.ndarray) -> np.ndarray:
    """The cosine of each row in scope. Gathering rows copies their vectors (100,000 x 384
    floats: slower than the product itself), so a contiguous scope (one conversation's
    units, appended in order) is read as a slice, and a large one by scanning every row
    (the matrix's products convert its int16 storage block by block, see numpy_exact)."""
    first, last = int(rows[0]), int(rows[-1])
    if last - first + 1 == rows.size:
        product = matrix.products(vector, first, last + 1)
    elif rows.size * 8 > n:
        product = matrix.products(vector, 0, n)[rows]
    else:
        product = matrix.products_at(vector, rows)
    return product.astype(np.float64)


def search_units(
    *,
    scope: ScopeFilter,
    query: str,
    k: int,
    mode: str = "hybrid",
    namespace: EmbeddingNamespace | None = None,
) -> UnitSearch:
    """The best `k` units for `query` in `scope`, one per message, best first."""
    if mode not in MODES:
        raise InvalidInput("mode must be hybrid, semantic or full_text", extra={"field": "mode"})
    started = time.perf_counter()
    namespace = namespace or search_namespace()
    backend = backend_for_namespace(namespace)
    matrix = INDEX.matrix(namespace_id=namespace.pk, dim=namespace.dim)
    n = matrix.count
    rows, local = matrix.scope_rows(scope, n)  # cached per scope: read-only
    stats = {"mode": mode, "namespace": f"{namespace.model}/{namespace.dim}", "units": rows.size}
    if rows.size == 0 or k <= 0:
        stats["elapsed_ms"] = round((time.perf_counter() - started) * 1000, 2)
        return UnitSearch([], stats)
    asked, named = _without_speakers(matrix, rows, query, mode)
    order = _Order.of(asked) if mode != "full_text" else None
    if order is not None:
        asked = order.topic
        stats["order_of_events"] = {"topic": asked, "own_words": order.own_words}
    terms = query_terms(asked)
    bm25 = bm25_scores(matrix, rows, local, n, terms) if mode != "semantic" else np.zeros(rows.size)
    if mode != "full_text":
        vector = embed_query(backend, asked).astype(np.float32)
        cosine = _cosines(matrix, rows, n, vector)
    else:
        cosine = np.zeros(rows.size)
    if mode == "hybrid":
        fused, picked = _hybrid(
            matrix, rows, local, n, terms, bm25, cosine, k, order=order, named=named
        )
    elif order is not None:
        fused = cosine
        messages = message_groups(matrix, rows, n)
        best = np.maximum.reduceat(cosine[messages.order], messages.starts)
        picked = _in_order(matrix, rows, messages, best, cosine, k, order)
    else:
        fused = _fused(mode, bm25, cosine)
        picked = _best_per_message(matrix, rows, fused, k)
    hits = _unit_hits(
        matrix, rows, picked, mode, backend, n=n, fused=fused, cosine=cosine, bm25=bm25
    )
    stats["selected"] = len(hits)
    stats["elapsed_ms"] = round((time.perf_counter() - started) * 1000, 2)
    return UnitSearch(hits, stats)


def _without_speakers(
    matrix: UnitMatrix, rows: np.ndarray, query: str, mode: str
) -> tuple[str, set[int]]:
    """(the question asked without the transcript's speakers it names, those speakers'
    indexes in scope): "What did Ana adopt?" is asked as "What did adopt?", since every
    line of hers carries her name; hybrid then prefers her lines (memory.speaker_focus).
    The question unchanged when it names none in scope, or would be left empty."""
    named, asked = (
        speakers_named(query, matrix.speaker_names)
        if matrix.speaker_names and mode != "full_text"
        else (set(), query)
    )
    if named:
        present = set(np.unique(matrix.speakers[rows]).tolist())
        named = named & present
        if not named:
            asked = query
    return (asked or query), named


def _hybrid(
    matrix: UnitMatrix,
    rows: np.ndarray,
    local: np.ndarray,
    n: int,
    terms: list[str],
    bm25: np.ndarray,
    cosine: np.ndarray,
    k: int,
    params: RankParams | None = None,
    order: _Order | None = None,
    named: set[int] = frozenset(),
) -> tuple[np.ndarray, list[int]]:
    """(each unit's fused score, the positions of the best unit of the `k` best messages):
    messages ranked by all their evidence, the lexical leg scaled by its confidence
    (memory.message_rank), the one speaker the question names preferred
    (memory.speaker_focus); for a question about the order of events, taken as
    `_in_order` says."""
    params = params or RankParams.from_settings()
    messages = message_groups(matrix, rows, n)
    whole, coverage = message_bm25(matrix, local, n, terms, messages)
    lexical = lexical_scale(float(coverage.max()) if coverage.size else 0.0, params)
    weight = params.bm25_weight
    semantic = _semantic_z(cosine)
    semantic *= 1 - weight
    fused = _z(bm25)  # in place below: each step over 100,000 units costs a copy otherwise
    np.minimum(fused, params.lexical_cap, out=fused)
    fused *= weight * lexical
    fused += semantic
    if params.neighbour_weight:
        lent = semantic - params.neighbour_floor
        np.maximum(lent, 0.0, out=lent)
        lent = _neighbour_sum(matrix, rows, local, n, lent)
        lent *= params.neighbour_weight
        fused += lent
    score = message_scores(fused, whole, messages, lexical, params, coverage)
    score = speaker_focus(score, matrix, rows, messages, named, params.speaker_weight)
    if order is not None:
        return fused, _in_order(matrix, rows, messages, score, fused, k, order)
    return fused, top_messages(score, fused, messages, k)


@dataclass(frozen=True)
class _Order:
    """A question about the order of events (memory.event_order): its topic, and whether it
    is about what the asker said (then only the user's messages answer it)."""

    topic: str
    own_words: bool

    @classmethod
    def of(cls, question: str) -> _Order | None:
        if not ordering_question(question):
            return None
        return cls(topic_of(question), about_own_words(question))


def _in_order(
    matrix: UnitMatrix,
    rows: np.ndarray,
    messages: Messages,
    score: np.ndarray,
    unit_scores: np.ndarray,
    k: int,
    order: _Order,
) -> list[int]:
    """The best unit of each of `k` messages for a question about the order of events:
    only the user's messages when it is about the asker's own words, spread over the
    sessions (memory.event_order.spread_by_session, on the message scores' z-scores)."""
    score = _z(np.where(np.isfinite(score), score, 0.0))
    if order.own_words:
        from_user = np.zeros(messages.count, dtype=bool)
        from_user[messages.group] = matrix.from_user[rows]
        if from_user.any():
            score = np.where(from_user, score, -np.inf)
    chosen = spread_by_session(score, _message_sessions(matrix, rows, messages), k)
    return best_units(chosen, unit_scores, messages)


def _message_sessions(matrix: UnitMatrix, rows: np.ndarray, messages: Messages) -> np.ndarray:
    """Each message's session (memory.event_order.sessions_of); kept with the scope."""
    extra = matrix.scope_extra(rows)
    found = extra.get("sessions") if extra is not None else None
    if found is not None:
        return found
    first = rows[messages.order[messages.starts]]  # a unit of each message
    found = sessions_of(matrix.times[first], matrix.conversations[first], matrix.seq_start[first])
    if extra is not None:
        extra["sessions"] = found
    return found


def _fused(mode: str, bm25: np.ndarray, cosine: np.ndarray) -> np.ndarray:
    """Each unit's score in the single-leg modes: semantic, the cosine; full_text, BM25
    (-inf without a query term). Hybrid ranks messages (`_hybrid`)."""
    if mode == "semantic":
        return cosine
    return np.where(bm25 > 0, bm25, -np.inf)


def _unit_hits(
    matrix: UnitMatrix,
    rows: np.ndarray,
    picked: list[int],
    mode: str,
    backend,
    *,
    n: int,
    fused: np.ndarray,
    cosine: np.ndarray,
    bm25: np.ndarray,
) -> list[UnitHit]:
    """The picked positions as hits with their chunks (text read back from the archive
    where retention moved it), in the order picked."""
    chunks = Chunk.objects.in_bulk([matrix.chunk_ids[rows[i]] for i in picked])
    hydrate_chunks(chunks.values())  # units whose text is in the archive (retention)
    alone = _alone_in_message(matrix, rows, n, picked)
    hits = []
    for i in picked:
        chunk = chunks.get(matrix.chunk_ids[rows[i]])
        if chunk is None:
            continue
        legs = {"vector"} if mode != "full_text" else set()
        if bm25[i] > 0:
            legs.add("full_text")
        hits.append(
            UnitHit(
                chunk=chunk,
                score=float(fused[i]),
                cosine=float(cosine[i]),
                similarity=calibrate(backend, float(cosine[i])) if mode != "full_text" else 0.0,
                bm25=float(bm25[i]),
                matched_by="both" if len(legs) == 2 else next(iter(legs), "vector"),
                alone=alone[i],
            )
        )
    return hits


def _alone_in_message(
    matrix: UnitMatrix, rows: np.ndarray, n: int, picked: list[int]
) -> dict[int, bool]:
    """For each picked position: is its unit its message's only one? Units of a message are
    adjacent in conversation order, so it is when neither neighbour starts at its seq (a
    window over several messages sharing that seq counts as a sibling: the passage query
    then decides). `n`: the matrix size the search read (its neighbours are kept for it)."""
    if not picked:
        return {}
    at = rows[np.array(picked)]
    seqs = matrix.seq_start[at]
    found = seqs == matrix.seq_end[at]  # a unit over several messages has no passage to grow
    for side in matrix.neighbours(n):  # (before, after) over the whole matrix, kept per size
        other = side[at]
        found &= ~((other >= 0) & (matrix.seq_start[np.maximum(other, 0)] == seqs))
    return dict(zip(picked, found.tolist(), strict=True))


def _best_per_message(
    matrix: UnitMatrix, rows: np.ndarray, scores: np.ndarray, k: int
) -> list[int]:
    """Positions (into `rows`) of the best `k` units, at most one per message."""
    finite = np.isfinite(scores)
    count = int(finite.sum())
    if count == 0:
        return []
    # enough to fill k after dropping second passages of the same message
    take = min(count, max(k * 4, 64))
    top = np.argpartition(-np.where(finite, scores, -np.inf), take - 1)[:take]
    top = top[np.argsort(-scores[top], kind="stable")]
    picked, seen = [], set()
    for i in top:
        if not finite[i]:
            break
        row = rows[i]
        key = (int(matrix.conversations[row]), int(matrix.seq_start[row]), int(matrix.seq_end[row]))
        if key in seen:
            continue
        seen.add(key)
        picked.append(int(i))
        if len(picked) == k:
            break
    return picked


def items_from_units(hits: list[UnitHit]) -> list[RetrievedItem]:
    """Search hits as retrieved items (the memory_search tool renders them as untrusted
    memory artifacts, each with its provenance and `recorded_at`). An item's text is its
    unit's passage, as grep's rows (memory.passages): the unit with its neighbours in the
    message, within LCM_SEARCH_PASSAGE_TOKENS; its provenance keeps the unit's offsets."""
    passages = passages_for(
        [hit.chunk for hit in hits], alone={h.chunk.pk for h in hits if h.alone}
    )
    items = []
    for rank, hit in enumerate(hits, start=1):
        item = item_for_chunk(
            hit.chunk,
            rank=rank,
            similarity=round(hit.similarity, 4),
            score=round(hit.score, 4),
            matched_by=hit.matched_by,
        )
        passage = passages[hit.chunk.pk]
        item.text, item.tokens = passage.text, passage.tokens
        items.append(item)
    return items
