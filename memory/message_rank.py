"""Hybrid search ranks messages, not only sentences (issue 34; docs/memory.md, "Recall").

A unit is about a sentence; a reader opens the message. So hybrid ranks each message by all
of its evidence and returns its best unit:

- **Whole-message BM25**: the units of a message partition its text, so summing their term
  frequencies and lengths gives each message's own BM25 (IDF and mean length over the
  messages in scope), computed from the units' postings with no second index.
- **Units** (memory.recall._hybrid): BM25 z-score capped at LEXICAL_CAP, times the
  confidence below, weighted LCM_SEARCH_BM25_WEIGHT, plus the cosine's z-score; then each
  unit gains LCM_SEARCH_NEIGHBOUR_WEIGHT x its neighbours' *semantic* scores above
  NEIGHBOUR_FLOOR (a neighbour's shared word is not lent on).
- **Message score** = its best unit's score + LCM_SEARCH_MESSAGE_WEIGHT x its message
  BM25's z-score (over the messages matching any term, capped at LEXICAL_CAP as the
  units' is: a word only a few messages hold gave them z-scores of 6-10, and a filler
  line naming the question's word outranked the paraphrased fact; issue 47): a long
  answer that holds the question's words across its sentences outranks a short message
  that shares one word. A
  one-unit message gets the message term too, from the same words. (A second-best-unit
  term was measured and dropped: it favours long messages by their length, BEAM r10 -0.07;
  so did a mean of the top three units.)
- **Long messages**: the best of many units is high by chance, so past LONG_MESSAGE_UNITS
  units a message's best unit loses LONG_MESSAGE_WEIGHT x its expected gain from the count
  (long_message_chance) x the spread of its other units (spread_besides_best), less as
  it holds more of the question's wording (held_wording: a long tool output with the
  line asked about is not a lucky draw).
- **Confidence**: the lexical leg (both BM25 terms) is scaled by how much of the question's
  IDF mass the best matching message holds (words absent from the scope count, at the
  highest IDF): at or above LCM_SEARCH_LEXICAL_CONFIDENCE it has its full weight, below it
  proportionally less. A question sharing only weak or few words with any message (a
  paraphrase) is then ranked by meaning, and the lexical leg cannot push out what the
  semantic leg is sure of.

Pure numpy over the unit cache (memory.vectors.numpy_exact.UnitMatrix); the per-scope
grouping of units into messages is kept with the scope's rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
from django.conf import settings

from memory.vectors.numpy_exact import UnitMatrix

K1, B = 1.2, 0.75
_NORMAL = NormalDist()
# A unit's BM25 z-score counts up to this: over a scope where few units hold a rare word,
# z-scores of 20-30 let one shared word outrank every meaning match (the paraphrase
# fixture: 0.595 uncapped). 3 measured best with the rest (docs/benchmarks.md).
LEXICAL_CAP = 3.0
# A message's best unit is the best of as many draws as it has units: a reply cut into 30
# units has one scoring ~2 of its own spreads above its mean by chance alone. Past
# LONG_MESSAGE_UNITS units, that expected gain over a message of that many
# (long_message_chance), times the spread of the message's other units, times
# LONG_MESSAGE_WEIGHT, is taken off its best unit (BEAM-100K's long replies; a match that
# stands out of a message of plain filler keeps its place). docs/benchmarks.md.
LONG_MESSAGE_UNITS = 6
# The correction is for luck: a message holding the question's wording is spared it, from
# none at this share of the question's IDF mass to all of it at 1 (held_wording).
WORDING_FLOOR = 0.8
LONG_MESSAGE_WEIGHT = 5.0
# Neighbours lend only their semantic score above this (z units): evidence runs in
# messages, but a unit among plain filler should not lose to one beside another match.
NEIGHBOUR_FLOOR = 1.0


@dataclass(frozen=True)
class RankParams:
    bm25_weight: float
    neighbour_weight: float
    message_weight: float
    confidence: float  # question IDF share at which the lexical leg has its full weight
    lexical_cap: float = LEXICAL_CAP
    message_cap: float = LEXICAL_CAP  # the message term's z-score counts up to this too
    neighbour_floor: float = NEIGHBOUR_FLOOR
    long_message_weight: float = LONG_MESSAGE_WEIGHT
    speaker_weight: float = 0.0  # memory.speaker_focus

    @classmethod
    def from_settings(cls) -> RankParams:
        return cls(
            speaker_weight=settings.LCM_SEARCH_SPEAKER_WEIGHT,
            bm25_weight=settings.LCM_SEARCH_BM25_WEIGHT,
            neighbour_weight=settings.LCM_SEARCH_NEIGHBOUR_WEIGHT,
            message_weight=settings.LCM_SEARCH_MESSAGE_WEIGHT,
            confidence=settings.LCM_SEARCH_LEXICAL_CONFIDENCE,
        )


@dataclass(frozen=True)
class Messages:
    """The scope's units grouped by message: `group[i]` is the message of position i,
    `length[g]` a message's term count."""

    group: np.ndarray
    count: int
    length: np.ndarray
    order: np.ndarray  # positions sorted by message (kept: no sort per search)
    starts: np.ndarray  # where each message's positions begin in `order`
    norm: np.ndarray  # BM25's length factor per message, K1 (1 - B + B length / mean)
    chance: np.ndarray  # what a message's best unit gains by its count alone (long_message_chance)
    others: np.ndarray  # units per message less one: its units besides the best


def message_groups(matrix: UnitMatrix, rows: np.ndarray, n: int) -> Messages:
    """Group the scope's units by (conversation, first seq, last seq); kept with the scope."""
    extra = matrix.scope_extra(rows)
    found = extra.get("messages") if extra is not None else None
    if found is not None:
        return found
    span = np.minimum(matrix.seq_end[rows] - matrix.seq_start[rows], 2**20 - 1)
    key = (
        matrix.conversations[rows].astype(np.int64) * 2**42
        + matrix.seq_start[rows].astype(np.int64) * 2**20
        + span
    )
    _, group = np.unique(key, return_inverse=True)
    group = group.astype(np.int32)
    count = int(group.max()) + 1 if group.size else 0
    length = np.bincount(group, weights=matrix.doclen[rows], minlength=count)
    order = np.argsort(group, kind="stable")
    starts = np.searchsorted(group[order], np.arange(count))
    average = float(length.mean()) if count else 1.0
    units = np.diff(np.append(starts, order.size))
    found = Messages(
        group=group,
        count=count,
        length=length,
        order=order,
        starts=starts,
        norm=K1 * (1 - B + B * length / (average or 1.0)),
        chance=long_message_chance(units),
        others=units - 1,
    )
    if extra is not None:
        extra["messages"] = found
    return found


def expected_best(units: np.ndarray) -> np.ndarray:
    """The expected best of `units` standard normal draws (Blom's approximation), 0 for one."""
    out = np.zeros(units.shape, dtype=np.float64)
    for count in np.unique(units):
        if count > 1:
            out[units == count] = _NORMAL.inv_cdf((count - 0.375) / (count + 0.25))
    return out


def long_message_chance(units: np.ndarray) -> np.ndarray:
    """Per message of `units` units: how much more its best unit scores by chance than a
    message of LONG_MESSAGE_UNITS units' (0 up to that many)."""
    floor = expected_best(np.array([LONG_MESSAGE_UNITS]))[0]
    return np.maximum(expected_best(units) - floor, 0.0)


def spread_besides_best(grouped: np.ndarray, best: np.ndarray, messages: Messages) -> np.ndarray:
    """Per message, the standard deviation of its unit scores (`grouped`: in `order`) other
    than its best (0 with fewer than two others)."""
    others = messages.others
    total = np.add.reduceat(grouped, messages.starts) - best
    squares = np.add.reduceat(grouped * grouped, messages.starts) - best * best
    count = np.maximum(others, 1)
    mean = total / count
    variance = np.where(others > 1, squares / count - mean * mean, 0.0)
    return np.sqrt(np.maximum(variance, 0.0))


def message_bm25(
    matrix: UnitMatrix,
    local: np.ndarray,
    n: int,
    terms: list[str],
    messages: Messages,
) -> tuple[np.ndarray, np.ndarray]:
    """(each message's BM25 over its whole text, each message's share of the question's IDF
    mass: how much of the question it holds). A term no message in scope holds counts at
    the highest IDF. Sparse: each term touches only the messages holding it (a dense pass
    per term over 100,000 messages cost more than the rest of the ranking)."""
    g = messages.count
    scores = np.zeros(g, dtype=np.float64)
    if not terms or g == 0:
        return scores, np.zeros(g, dtype=np.float64)
    norm = messages.norm
    mass = np.zeros(g, dtype=np.float64)
    total = 0.0
    for term in terms:
        hit_rows, tfs = matrix.inverted.postings(term, n)
        at = local[hit_rows] if hit_rows.size else hit_rows
        keep = at >= 0
        held, tf = _per_message(messages.group[at[keep]], tfs[keep])
        idf = math.log(1 + (g - held.size + 0.5) / (held.size + 0.5))
        total += idf
        if held.size:
            scores[held] += idf * tf * (K1 + 1) / (tf + norm[held])
            mass[held] += idf
    return scores, (mass / total if total > 0 else mass)


def _per_message(groups: np.ndarray, tfs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the messages holding a term, its frequency summed over each one's units)."""
    if groups.size == 0:
        return groups, tfs
    held, inverse = np.unique(groups, return_inverse=True)
    return held, np.bincount(inverse, weights=tfs, minlength=held.size)


def lexical_scale(share: float, params: RankParams) -> float:
    """The lexical leg's weight factor for a question whose best message holds `share` of
    its IDF mass (module doc)."""
    if params.confidence <= 0:
        return 1.0
    return min(1.0, share / params.confidence)


def z_over_matches(values: np.ndarray) -> np.ndarray:
    """z-scores over the entries above 0 (the messages holding any query term), 0 for the
    rest: a message that matches nothing gets no lexical evidence either way."""
    matched = values > 0
    if matched.sum() < 2:
        return np.where(matched, 1.0, 0.0)
    picked = values[matched]
    std = float(picked.std()) or 1.0
    return np.where(matched, (values - float(picked.mean())) / std, 0.0)


def message_scores(
    unit_scores: np.ndarray,
    whole: np.ndarray,
    messages: Messages,
    lexical: float,
    params,
    coverage: np.ndarray | None = None,
) -> np.ndarray:
    """Each message's score (module doc): its best unit's, plus its whole-message BM25 term.
    `coverage`: each message's share of the question's IDF mass; the long-message term is
    for a best unit high by chance, and a message holding the question's words is not."""
    if messages.count == 0:
        return np.zeros(0)
    grouped = unit_scores[messages.order]
    score = np.maximum.reduceat(grouped, messages.starts)
    if params.long_message_weight and messages.chance.any():  # none past the floor: skipped
        spread = spread_besides_best(grouped, score, messages)
        penalty = params.long_message_weight * messages.chance * spread
        if coverage is not None:
            penalty *= 1.0 - held_wording(coverage)
        score -= penalty
    if params.message_weight and lexical:
        term = z_over_matches(whole)
        np.minimum(term, params.message_cap, out=term)
        score += params.message_weight * lexical * term
    return score


def held_wording(coverage: np.ndarray) -> np.ndarray:
    """0 to 1: how far a message's share of the question's IDF mass says it holds the
    question's wording, 0 up to WORDING_FLOOR (a long reply shares common words with
    most questions: BEAM), 1 at all of it (a tool output with the line a question quotes)."""
    return np.clip((coverage - WORDING_FLOOR) / (1.0 - WORDING_FLOOR), 0.0, 1.0)


def top_messages(
    score: np.ndarray, unit_scores: np.ndarray, messages: Messages, k: int
) -> list[int]:
    """Positions of the best unit of each of the `k` best messages, best first."""
    if score.size == 0 or k <= 0:
        return []
    take = min(k, score.size)
    top = np.argpartition(-score, take - 1)[:take]
    top = top[np.argsort(-score[top], kind="stable")]
    return best_units([int(m) for m in top if np.isfinite(score[m])], unit_scores, messages)


def best_units(chosen: list[int], unit_scores: np.ndarray, messages: Messages) -> list[int]:
    """The position of the best unit of each message in `chosen`, in that order."""
    ends = np.append(messages.starts[1:], messages.order.size)
    picked = []
    for m in chosen:
        units = messages.order[messages.starts[m] : ends[m]]
        picked.append(int(units[np.argmax(unit_scores[units])]))
    return picked
