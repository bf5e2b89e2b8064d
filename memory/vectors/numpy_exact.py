"""Exact search with numpy over a per-process cache of each namespace's vectors.

The cache holds one matrix per namespace plus the item id (chunk, or summary for
`SUMMARY_INDEX`), conversation id, last message seq and owner of each row; it is refreshed incrementally (rows with a ChunkVector id
above the highest one cached), so a search costs one small query plus a matrix-vector
product. Vectors are immutable, so cached rows never go stale. Scope filtering is a
vectorised mask.

Storage (LCM_VECTOR_CACHE_DTYPE): `int16` (default) keeps each vector as 16-bit integers
with one float32 scale per row (the row's largest component maps to 32,767), half the
bytes of float32; a product converts 1,024 rows at a time into a reused float32 buffer
and multiplies there, which reads half the memory of a float32 scan and measured about
twice as fast (docs/benchmarks.md). Rounding moves a component by at most half a step
(its row's peak / 65,534), a cosine typically by a few 1e-6 (at most 7e-6 over 100,000
random unit vectors). `float32` keeps the vectors as stored. Every vector enters the cache
through `decode_vector_blobs`, the one place a stored format is read.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from django.conf import settings
from django.db import connection
from django.utils import timezone

from memory.embeddings.blas import limit_blas_threads
from memory.inverted_index import InvertedIndex
from memory.lexical import speaker_label, terms
from memory.vectors.base import ScopeFilter, VectorHit
from memory.vectors.codec import decode_vectors

# Rows read per query while filling: each batch's blobs and texts are transient (a 20,000
# batch raised a 100,000-unit fill's peak resident memory by ~120 MB over what it keeps).
_FETCH_BATCH = 5_000
# Rows older than this are committed or never will be (see _refreshed).
SETTLE_SECONDS = 60
# Clock margin between a row's created_at (set by Python) and PostgreSQL's xact_start.
_CLOCK_MARGIN = dt.timedelta(seconds=1)
# Summaries have no message range: a scope that stops at a fork point (a seq bound) never
# sees them, like the lcm_grep tool drops ancestor summaries.
_NO_SEQ = 2**62
# Rows converted per block of a quantised product (1,024 x 384 float32 is 1.5 MB, read
# back from the core's caches; 1,024 and 2,048 measured alike, 512 slower).
_BLOCK_ROWS = 1024
_INT16_MAX = 32767
STORAGES = ("int16", "float32")
_SCOPES_KEPT = 2  # scopes whose rows a unit matrix keeps (1M units: up to 24 MB each)
_buffers = threading.local()  # each thread's float32 conversion buffer


def decode_vector_blobs(blobs: list[bytes], dim: int) -> np.ndarray:
    """The float32 matrix (len(blobs) x dim) of stored vector blobs: the one function the
    cache reads stored vectors with (memory.vectors.codec: plain float32, or the float16 /
    int8 forms retention gives archived content)."""
    return decode_vectors(blobs, dim)


def quantise_int16(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(int16 rows, float32 scale per row): row ~= ints * scale, the largest component of
    each row at +-32,767 (a rounding error under 1.6e-5 of that component)."""
    peak = np.abs(vectors).max(axis=1) if vectors.size else np.zeros(len(vectors))
    scales = (peak / _INT16_MAX).astype(np.float32)
    safe = np.where(scales > 0, scales, np.float32(1))
    ints = np.rint(vectors / safe[:, None]).astype(np.int16)
    return ints, scales


def _buffer(rows: int, dim: int) -> np.ndarray:
    buffer = getattr(_buffers, "array", None)
    if buffer is None or buffer.shape[1] != dim or buffer.shape[0] < rows:
        buffer = _buffers.array = np.empty((max(rows, _BLOCK_ROWS), dim), np.float32)
    return buffer[:rows]


@dataclass(frozen=True)
class Source:
    """Which vectors a matrix holds: chunk vectors, or summary vectors (grep)."""

    table: str  # the vector table
    item_column: str  # its column naming the item (the id a hit returns)
    rows_sql: str  # id, item id, conversation id, seq end, owner id, vector


CHUNKS = Source(
    table="memory_chunkvector",
    item_column="chunk_id",
    rows_sql=(
        # the last four columns feed UnitMatrix (search's BM25, neighbours and speakers;
        # the unit's time and whether its message is the user's, for questions about the
        # order of events: memory.event_order)
        "SELECT v.id, c.id, c.conversation_id, c.seq_end, cv.owner_id, v.vector, "
        "c.seq_start, c.rendered_text, c.source_created_at, "
        "(SELECT m.role FROM conversations_message m "
        "WHERE m.conversation_id = c.conversation_id AND m.seq = c.seq_start) "
        "FROM memory_chunkvector v "
        "JOIN memory_chunk c ON c.id = v.chunk_id "
        "JOIN conversations_conversation cv ON cv.id = c.conversation_id "
        "WHERE v.namespace_id = %s AND v.id > %s ORDER BY v.id LIMIT %s"
    ),
)
SUMMARIES = Source(
    table="memory_summaryvector",
    item_column="summary_id",
    rows_sql=(
        f"SELECT v.id, s.id, s.conversation_id, {_NO_SEQ}, cv.owner_id, v.vector "
        "FROM memory_summaryvector v "
        "JOIN conversations_summary s ON s.id = v.summary_id "
        "JOIN conversations_conversation cv ON cv.id = s.conversation_id "
        "WHERE v.namespace_id = %s AND v.id > %s ORDER BY v.id LIMIT %s"
    ),
)


@dataclass
class _Matrix:
    dim: int
    storage: str = "float32"  # or int16 (LCM_VECTOR_CACHE_DTYPE; see the module doc)
    # Every row with an id <= settled_id is loaded; above it, `recent` says which are.
    settled_id: int = 0
    recent: set[int] = field(default_factory=set)
    max_id: int = 0
    last_item: str = ""  # the item of max_id (detects a rebuilt table in tests)
    windowed_at: float = 0.0  # monotonic time of the last listing of ids
    count: int = 0
    vectors: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    chunk_ids: list[str] = field(default_factory=list)
    conversations: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    seq_end: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    owners: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    scales: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))  # int16

    def __post_init__(self) -> None:
        if self.storage not in STORAGES:
            raise ValueError(f"unknown vector storage {self.storage!r}")
        if self.storage == "int16":
            self.vectors = np.zeros((0, self.dim), np.int16)

    def reserve(self, capacity: int) -> None:
        """Room for `capacity` rows (the count is known before a refresh loads them, so a
        full load allocates once, at its exact size)."""
        if capacity <= self.vectors.shape[0]:
            return
        self.vectors = _resize(self.vectors, (capacity, self.dim))
        if self.storage == "int16":
            self.scales = _resize(self.scales, (capacity,))
        self.conversations = _resize(self.conversations, (capacity,))
        self.seq_end = _resize(self.seq_end, (capacity,))
        self.owners = _resize(self.owners, (capacity,))

    def grow(self, rows: list[tuple]) -> None:
        rows = [row for row in rows if row[0] > self.settled_id and row[0] not in self.recent]
        if not rows:
            return
        need = self.count + len(rows)
        if need > self.vectors.shape[0]:
            self.reserve(max(need, self.vectors.shape[0] + 1024))
        ids, chunk_ids, conversations, seq_ends, owners, blobs = zip(
            *(row[:6] for row in rows), strict=True
        )
        block = decode_vector_blobs(list(blobs), self.dim)
        if self.storage == "int16":
            self.vectors[self.count : need], self.scales[self.count : need] = quantise_int16(block)
        else:
            self.vectors[self.count : need] = block
        self.conversations[self.count : need] = conversations
        self.seq_end[self.count : need] = seq_ends
        self.owners[self.count : need] = owners
        self.chunk_ids.extend(chunk_ids)
        self.recent.update(ids)
        for vid, item in zip(ids, chunk_ids, strict=True):
            if vid > self.max_id:
                self.max_id, self.last_item = vid, item
        self.count = need

    def products(self, query: np.ndarray, start: int, stop: int) -> np.ndarray:
        """float32 dot products of rows start..stop-1 with `query` (float32)."""
        # One BLAS thread, as for the model (memory/embeddings/blas.py), also in a process
        # that never loads it: with OpenBLAS's spinning threads a 2,048-row block's product
        # took 40x longer at load 5.
        limit_blas_threads()
        if self.storage == "float32":
            return self.vectors[start:stop] @ query
        out = np.empty(stop - start, np.float32)
        for first in range(start, stop, _BLOCK_ROWS):
            last = min(stop, first + _BLOCK_ROWS)
            buffer = _buffer(last - first, self.dim)
            np.copyto(buffer, self.vectors[first:last])  # int16 -> float32
            np.matmul(buffer, query, out=out[first - start : last - start])
        out *= self.scales[start:stop]
        return out

    def products_at(self, query: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """float32 dot products of the given rows with `query` (a gather: few rows)."""
        limit_blas_threads()
        if self.storage == "float32":
            return self.vectors[rows] @ query
        out = self.vectors[rows].astype(np.float32) @ query
        out *= self.scales[rows]
        return out


@dataclass
class UnitMatrix(_Matrix):
    """A chunk matrix that also keeps, per row, what search ranks with besides the vector
    (memory.recall): the first message seq, its term count and speaker label, its time
    (seconds since the epoch) and whether its message is the user's, and an inverted index
    of its terms (memory.inverted_index, terms from memory.lexical)."""

    seq_start: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    times: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64))
    from_user: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    doclen: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    inverted: InvertedIndex = field(default_factory=InvertedIndex)
    # the speaker label a unit's text starts with ("Ana: ..."), as an index into
    # speaker_names (-1: none)
    speakers: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    speaker_names: list[str] = field(default_factory=list)
    speaker_ids: dict[str, int] = field(default_factory=dict)
    _scopes: dict = field(default_factory=dict, repr=False, compare=False)  # see scope_rows

    def reserve(self, capacity: int) -> None:
        if capacity > self.seq_start.shape[0]:
            self.seq_start = _resize(self.seq_start, (capacity,))
            self.times = _resize(self.times, (capacity,))
            self.from_user = _resize(self.from_user, (capacity,))
            self.doclen = _resize(self.doclen, (capacity,))
            self.speakers = _resize(self.speakers, (capacity,))
        super().reserve(capacity)

    def grow(self, rows: list[tuple]) -> None:
        rows = [row for row in rows if row[0] > self.settled_id and row[0] not in self.recent]
        if not rows:
            return
        start = self.count
        super().grow([row[:6] for row in rows])
        texts = [row[7] or "" for row in rows]
        self.seq_start[start : self.count] = [row[6] for row in rows]
        self.times[start : self.count] = [_epoch(row[8]) for row in rows]
        self.from_user[start : self.count] = [row[9] == "user" for row in rows]
        for at, text in enumerate(texts, start):
            label = speaker_label(text)
            if label is None:
                self.speakers[at] = -1
            else:
                index = self.speaker_ids.get(label)
                if index is None:
                    index = self.speaker_ids[label] = len(self.speaker_names)
                    self.speaker_names.append(label)
                self.speakers[at] = index
        found = [terms(text) for text in texts]
        lengths = np.fromiter(map(len, found), dtype=np.int64, count=len(found))
        self.doclen[start : self.count] = lengths
        self.inverted.add(found, start, lengths)

    def neighbours(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """For each of the first `n` rows, the row of the unit before and after it in its
        conversation (by first message seq, then row order; -1 at the ends). Sorted once
        per matrix size, not per search."""
        cached = getattr(self, "_neighbours", None)
        if cached is not None and cached[0] == n:
            return cached[1], cached[2]
        conversations = self.conversations[:n]
        order = np.lexsort((np.arange(n), self.seq_start[:n], conversations))
        same = conversations[order][1:] == conversations[order][:-1]
        before = np.full(n, -1, dtype=np.int64)
        after = np.full(n, -1, dtype=np.int64)
        before[order[1:]] = np.where(same, order[:-1], -1)
        after[order[:-1]] = np.where(same, order[1:], -1)
        self._neighbours = (n, before, after)
        return before, after

    def scope_rows(self, scope: ScopeFilter, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(rows in scope among the first `n`, ascending; `local`: each row's position in
        them, -1 out of scope). Kept for the last _SCOPES_KEPT (scope, n) so a repeated
        search allocates no n-sized arrays; read-only."""
        key = (scope, n)
        found = self._scopes.get(key)
        if found is not None:
            return found[0], found[1]
        mask = _scope_mask(self, n, scope)
        rows = np.flatnonzero(mask) if mask is not None else np.arange(n)
        local = np.full(n, -1, dtype=np.int32)  # positions: int32 halves what is kept
        local[rows] = np.arange(rows.size, dtype=np.int32)
        rows.flags.writeable = local.flags.writeable = False
        kept = dict(list(self._scopes.items())[-(_SCOPES_KEPT - 1) :])
        kept[key] = (rows, local, {})
        self._scopes = kept  # replaced, not changed: other threads read their snapshot
        return rows, local

    def scope_extra(self, rows: np.ndarray) -> dict | None:
        """What searches keep with a scope from scope_rows (by its `rows`), or None."""
        return next((e for r, _, e in self._scopes.values() if r is rows), None)

    def neighbour_positions(
        self, rows: np.ndarray, local: np.ndarray, n: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """For each of `rows`, the position (in `rows`) of its unit before and after it in
        its conversation (-1: none, or out of scope); kept with a scope from scope_rows."""
        extra = self.scope_extra(rows)
        if extra is not None and "neighbours" in extra:
            return extra["neighbours"]
        before, after = self.neighbours(n)
        sides = []
        for side in (before[rows], after[rows]):
            sides.append(np.where(side >= 0, local[np.maximum(side, 0)], np.int32(-1)))
        found = (sides[0], sides[1])
        if extra is not None:
            extra["neighbours"] = found
        return found


def _epoch(value) -> float:
    """A timestamp column as seconds since the epoch (SQLite hands back text)."""
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return value.timestamp()


def _resize(array: np.ndarray, shape: tuple) -> np.ndarray:
    grown = np.zeros(shape, dtype=array.dtype)
    if array.size:
        grown[: array.shape[0]] = array
    return grown


def _settle_cutoff(cursor) -> dt.datetime:
    """Rows created before this are committed (or never will be): no row can appear later
    below an id already seen.

    SQLite: a writer holds the database lock from its insert to its commit, so ids commit in
    order and every visible row is settled. PostgreSQL: a row not committed yet belongs to
    a transaction still open, and its created_at is later than that transaction's start;
    so rows created before the oldest open transaction (of the app's role, the sessions
    pg_stat_activity shows it) began are settled, less a clock margin, and at most
    SETTLE_SECONDS old rows wait."""
    now = timezone.now()
    if connection.vendor != "postgresql":
        return now + dt.timedelta(days=1)
    cursor.execute(
        "SELECT MIN(xact_start) FROM pg_stat_activity "
        "WHERE datname = current_database() AND xact_start IS NOT NULL "
        "AND pid <> pg_backend_pid()"
    )
    (oldest,) = cursor.fetchone()
    horizon = min(oldest, now) if oldest is not None else now
    return max(horizon - _CLOCK_MARGIN, now - dt.timedelta(seconds=SETTLE_SECONDS))


class NumpyExactIndex:
    name = "numpy"

    def __init__(self, source: Source = CHUNKS, matrix_class: type[_Matrix] = _Matrix) -> None:
        self.source = source
        self.matrix_class = matrix_class
        self._lock = threading.Lock()
        # keyed by (database alias + name, namespace id): tests switch databases
        self._matrices: dict[tuple[str, int], _Matrix] = {}

    def reset(self) -> None:
        with self._lock:
            self._matrices.clear()

    def _window(self, cursor, matrix: _Matrix, namespace_id: int) -> list[tuple]:
        """(id, item, settled) of every row above the settled watermark: one index range."""
        cutoff = _settle_cutoff(cursor)
        cursor.execute(
            f"SELECT id, {self.source.item_column}, "
            "CASE WHEN created_at < %s THEN 1 ELSE 0 END "
            f"FROM {self.source.table} WHERE namespace_id = %s AND id > %s ORDER BY id",
            [cutoff, namespace_id, matrix.settled_id],
        )
        return cursor.fetchall()

    def _refreshed(self, namespace_id: int, dim: int) -> _Matrix:
        """Load the rows not cached yet. Ids are not committed in order on PostgreSQL (a
        writer that took id 100 may commit after one that took 101), so the watermark is
        only advanced past rows older than SETTLE_SECONDS; newer ones are tracked by id.
        Indexing writes in one short transaction, far shorter than that.

        A search costs one aggregate query over the index range above the watermark: if
        it holds exactly the rows cached (same count, same highest id and item), nothing
        is read. Otherwise, or every SETTLE_SECONDS / 2 while recent rows wait to settle,
        the ids above the watermark are listed and the missing rows loaded."""
        key = (f"{connection.alias}:{connection.settings_dict['NAME']}", namespace_id)
        table, item_column = self.source.table, self.source.item_column
        with self._lock:
            storage = settings.LCM_VECTOR_CACHE_DTYPE
            matrix = self._matrices.get(key)
            if matrix is None or matrix.dim != dim or matrix.storage != storage:
                matrix = self._matrices[key] = self.matrix_class(dim=dim, storage=storage)
            with connection.cursor() as cursor:
                cursor.execute(
                    f"SELECT COUNT(*), COALESCE(MAX(id), 0), "
                    f"(SELECT {item_column} FROM {table} WHERE id = %s) "
                    f"FROM {table} WHERE namespace_id = %s AND id > %s",
                    [matrix.max_id, namespace_id, matrix.settled_id],
                )
                above, highest, last_item = cursor.fetchone()
                if matrix.count and last_item != matrix.last_item:
                    # the newest cached row is gone or holds another item: a test's
                    # rolled-back rows whose ids were reused (never so otherwise)
                    matrix = self._matrices[key] = self.matrix_class(dim=dim, storage=storage)
                now = time.monotonic()
                # (nothing above a watermark that holds every row: no rows, highest 0)
                unchanged = above == len(matrix.recent) and highest == (
                    matrix.max_id if matrix.recent else 0
                )
                settle_due = bool(matrix.recent) and now - matrix.windowed_at > SETTLE_SECONDS / 2
                if matrix.count == 0 or not unchanged or settle_due:
                    self._load_window(cursor, matrix, namespace_id)
                    matrix.windowed_at = now
            return matrix

    def _load_window(self, cursor, matrix: _Matrix, namespace_id: int) -> None:
        window = self._window(cursor, matrix, namespace_id)
        missing = [vid for vid, _, _ in window if vid not in matrix.recent]
        if missing:
            matrix.reserve(matrix.count + len(missing) + 256)  # room for new rows
            after, pending = missing[0] - 1, len(missing)
            while pending > 0:
                cursor.execute(self.source.rows_sql, [namespace_id, after, _FETCH_BATCH])
                rows = cursor.fetchall()
                if not rows:
                    break
                before = matrix.count
                matrix.grow(rows)
                pending -= matrix.count - before
                after = rows[-1][0]
        # Advance the watermark over the settled, loaded prefix of the window.
        for vid, _, settled in window:
            if not settled or vid not in matrix.recent:
                break
            matrix.settled_id = vid
        matrix.recent = {vid for vid in matrix.recent if vid > matrix.settled_id}

    def matrix(self, *, namespace_id: int, dim: int) -> _Matrix:
        """The namespace's matrix, refreshed (its first `count` rows are stable)."""
        return self._refreshed(namespace_id, dim)

    def search(
        self, *, namespace_id: int, query: np.ndarray, scope: ScopeFilter, k: int, dim: int = 0
    ) -> list[VectorHit]:
        return self.searcher(
            namespace_id=namespace_id, scope=scope, k=k, dim=dim or int(query.shape[0])
        )(query)

    def searcher(
        self, *, namespace_id: int, scope: ScopeFilter, k: int, dim: int
    ) -> Callable[[np.ndarray], list[VectorHit]]:
        """Refresh the cache here (database work), and return the scan as a function of
        the query that touches no database, so it can run on another thread (hybrid
        retrieval runs it there while this thread runs the full-text leg). The rows it
        scans are fixed now; later refreshes only append beyond them."""
        matrix = self._refreshed(namespace_id, dim)
        n = matrix.count

        def scan(query: np.ndarray) -> list[VectorHit]:
            if n == 0 or k <= 0:
                return []
            scores = matrix.products(query.astype(np.float32), 0, n)
            mask = _scope_mask(matrix, n, scope)
            if mask is not None:
                scores = np.where(mask, scores, -np.inf)
            top_k = min(k, n)
            top = np.argpartition(-scores, top_k - 1)[:top_k]
            top = top[np.argsort(-scores[top], kind="stable")]
            return [
                VectorHit(matrix.chunk_ids[i], float(scores[i]))
                for i in top
                if np.isfinite(scores[i])
            ]

        return scan


def _scope_mask(matrix: _Matrix, n: int, scope: ScopeFilter) -> np.ndarray | None:
    if scope.conversations is not None:
        mask = np.zeros(n, dtype=bool)
        conversations = matrix.conversations[:n]
        for conversation_id, max_seq in scope.conversations:
            hit = conversations == conversation_id
            if max_seq is not None:
                hit &= matrix.seq_end[:n] <= max_seq
            mask |= hit
        return mask
    if scope.owner_id is not None:
        return matrix.owners[:n] == scope.owner_id
    return None


INDEX = NumpyExactIndex(CHUNKS, UnitMatrix)
SUMMARY_INDEX = NumpyExactIndex(SUMMARIES)
