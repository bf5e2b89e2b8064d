"""The BM25 leg's inverted index over the rows of the unit cache
(memory.vectors.numpy_exact.UnitMatrix): for each term (memory.lexical), the rows holding it
and how often.

`vocabulary` numbers the terms; `segments` hold the postings (row numbers as int32, term
frequencies), one segment per batch of rows added, a newer one merged into the one before
while it is at least half that one's size (so a few segments, of doubling sizes). Adding
replaces the list of segments rather than changing it, so a search reading a snapshot of
it never sees a half-written segment.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class PostingSegment:
    """The postings of one run of rows, by term id: the postings of term `terms[i]` are
    rows[bounds[i]:bounds[i + 1]] (ascending) with their term frequencies."""

    terms: np.ndarray  # int32 term ids, ascending
    bounds: np.ndarray  # int64, len(terms) + 1
    rows: np.ndarray  # int32
    tfs: np.ndarray  # float32

    @classmethod
    def build(
        cls, term_ids: np.ndarray, rows: np.ndarray, tfs: np.ndarray | None
    ) -> PostingSegment:
        """From postings in row order (`tfs` None: one entry per occurrence, counted here)."""
        order = np.argsort(term_ids, kind="stable")  # by term; rows stay ascending
        term_ids, rows = term_ids[order], rows[order]
        if tfs is None:
            new = np.ones(term_ids.size, dtype=bool)
            new[1:] = (term_ids[1:] != term_ids[:-1]) | (rows[1:] != rows[:-1])
            starts = np.flatnonzero(new)
            tfs = np.diff(np.append(starts, term_ids.size)).astype(np.float32)
            term_ids, rows = term_ids[starts], rows[starts]
        else:
            tfs = tfs[order]
        first = np.ones(term_ids.size, dtype=bool)
        first[1:] = term_ids[1:] != term_ids[:-1]
        at = np.flatnonzero(first)
        return cls(
            terms=term_ids[at].astype(np.int32),
            bounds=np.append(at, term_ids.size).astype(np.int64),
            rows=rows.astype(np.int32),
            tfs=tfs.astype(np.float32),
        )

    @property
    def size(self) -> int:
        return int(self.rows.size)

    def get(self, term_id: int) -> tuple[np.ndarray, np.ndarray] | None:
        i = int(np.searchsorted(self.terms, term_id))
        if i == self.terms.size or self.terms[i] != term_id:
            return None
        lo, hi = self.bounds[i], self.bounds[i + 1]
        return self.rows[lo:hi], self.tfs[lo:hi]

    @staticmethod
    def merge(older: PostingSegment, newer: PostingSegment) -> PostingSegment:
        parts = (older, newer)
        ids = np.concatenate([np.repeat(p.terms, np.diff(p.bounds)) for p in parts])
        rows = np.concatenate([p.rows for p in parts])
        return PostingSegment.build(ids, rows, np.concatenate([p.tfs for p in parts]))


@dataclass
class InvertedIndex:
    vocabulary: dict[str, int] = field(default_factory=dict)
    segments: list[PostingSegment] = field(default_factory=list)

    def add(self, found: list[list[str]], start: int, lengths: np.ndarray) -> None:
        """Index rows `start`, `start + 1`, ... holding the terms `found` (one list per row,
        repeats kept; `lengths`: the size of each). Every term occurrence gets its term id
        and row in a few array operations; the segment counts repeats into frequencies."""
        vocabulary = self.vocabulary
        term_ids = np.fromiter(
            (vocabulary.setdefault(t, len(vocabulary)) for words in found for t in words),
            dtype=np.int64,
            count=int(lengths.sum()),
        )
        at_rows = np.repeat(np.arange(start, start + len(found), dtype=np.int64), lengths)
        segments = [*self.segments, PostingSegment.build(term_ids, at_rows, None)]
        while len(segments) > 1 and segments[-1].size * 2 >= segments[-2].size:
            segments[-2:] = [PostingSegment.merge(segments[-2], segments[-1])]
        self.segments = segments

    def postings(self, term: str, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(rows, term frequencies) of `term` among the first `n` rows."""
        term_id = self.vocabulary.get(term)
        found = [] if term_id is None else [s.get(term_id) for s in self.segments]
        pieces = [piece for piece in found if piece is not None]
        if not pieces:
            return np.zeros(0, np.int32), np.zeros(0, np.float32)
        rows = pieces[0][0] if len(pieces) == 1 else np.concatenate([p[0] for p in pieces])
        tfs = pieces[0][1] if len(pieces) == 1 else np.concatenate([p[1] for p in pieces])
        keep = rows < n
        return (rows, tfs) if keep.all() else (rows[keep], tfs[keep])
