"""The per-process vector cache's storage (memory.vectors.numpy_exact): int16 rows with a
scale per row rank as float32 rows do, within a bound the quantisation proves."""

import numpy as np
import pytest
from django.db import connection

from memory.indexing import index_conversation_messages
from memory.namespaces import search_namespace
from memory.recall import search_units
from memory.vectors.base import ScopeFilter
from memory.vectors.numpy_exact import (
    _BLOCK_ROWS,
    INDEX,
    NumpyExactIndex,
    _Matrix,
    decode_vector_blobs,
    quantise_int16,
)
from tests.memory.helpers import append

TOPICS = [
    "the ferry to the island leaves at noon",
    "my sister bought a red bicycle",
    "we cooked lentil soup with lemon",
    "the printer on the third floor jams",
    "Pixel the grey kitten sleeps on the sofa",
    "a storm closed the mountain pass",
    "the bakery sells rye bread on Mondays",
    "our team moved the launch to March",
    "I renewed my passport at the embassy",
    "the garden tomatoes ripened early",
]
QUESTIONS = [
    "When does the boat leave?",
    "What did my sister buy?",
    "What is the cat called?",
    "Which road was closed by the weather?",
    "When was the launch moved to?",
    "What soup did we make?",
]


WHEN = "2024-03-01 10:00:00"  # a unit's time as SQLite hands it back (text)


def _rows(vectors: np.ndarray) -> list[tuple]:
    return [
        (i + 1, f"chk_{i}", 1, i + 1, 1, v.astype("<f4").tobytes()) for i, v in enumerate(vectors)
    ]


def _bound(vectors: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Per row, the largest error int16 rounding can make in a dot product: each component
    is off by at most half a step (its row's peak / 32,767 / 2)."""
    step = np.abs(vectors).max(axis=1) / 32767
    return step / 2 * np.abs(query).sum() + 1e-6  # + float32 summation


def test_int16_products_stay_within_the_rounding_bound_across_blocks():
    rng = np.random.default_rng(3)
    count, dim = _BLOCK_ROWS * 2 + 77, 48
    vectors = rng.standard_normal((count, dim)).astype(np.float32)
    vectors[5] = 0.0  # a zero row quantises to zeros with scale 0
    vectors[9] *= 40.0  # rows need not be unit length: the scale is per row
    exact, small = _Matrix(dim=dim), _Matrix(dim=dim, storage="int16")
    exact.grow(_rows(vectors))
    small.grow(_rows(vectors))
    assert small.vectors.dtype == np.int16 and small.vectors.nbytes * 2 == exact.vectors.nbytes
    query = rng.standard_normal(dim).astype(np.float32)
    want = vectors.astype(np.float64) @ query.astype(np.float64)
    got = small.products(query, 3, count)
    assert got.shape == (count - 3,)
    assert np.all(np.abs(got - want[3:]) <= _bound(vectors, query)[3:])
    assert got[5 - 3] == 0.0
    picked = np.array([0, 9, _BLOCK_ROWS, count - 1])
    at = small.products_at(query, picked)
    assert np.all(np.abs(at - want[picked]) <= _bound(vectors, query)[picked])
    np.testing.assert_allclose(exact.products(query, 0, count), want, rtol=0, atol=1e-4)


def test_stored_blobs_decode_to_float32_rows_and_quantise_back():
    rows = np.array([[0.5, -0.25, 0.0], [0.0, 0.0, 0.0]], dtype=np.float32)
    decoded = decode_vector_blobs([r.astype("<f4").tobytes() for r in rows], 3)
    assert decoded.dtype == np.float32 and decoded.tolist() == rows.tolist()
    ints, scales = quantise_int16(decoded)
    assert ints.tolist() == [[32767, -16384, 0], [0, 0, 0]]  # -16383.5 rounds to even
    assert scales.tolist() == [np.float32(0.5 / 32767), 0.0]


def test_an_unknown_storage_is_refused():
    with pytest.raises(ValueError, match="float8"):
        _Matrix(dim=3, storage="float8")


@pytest.fixture
def built(conversation, settings):
    settings.LCM_CHUNK_TOPIC_SHIFT = 2.0
    append(conversation, *(f"{TOPICS[i % 10]} (note {i})" for i in range(60)))
    index_conversation_messages(conversation_id=conversation.pk)
    return conversation


def _searches(conversation) -> list[list[tuple[str, float]]]:
    scope = ScopeFilter(conversations=((conversation.pk, None),))
    return [
        [(h.chunk.pk, h.cosine) for h in search_units(scope=scope, query=q, k=20, mode=m).hits]
        for q in QUESTIONS
        for m in ("semantic", "hybrid")
    ]


@pytest.mark.embedding_model
@pytest.mark.django_db
def test_the_int16_cache_ranks_a_conversation_as_float32_does(built, settings):
    namespace = search_namespace()
    settings.LCM_VECTOR_CACHE_DTYPE = "float32"
    exact = _searches(built)
    assert INDEX.matrix(namespace_id=namespace.pk, dim=namespace.dim).vectors.dtype == np.float32
    settings.LCM_VECTOR_CACHE_DTYPE = "int16"
    small = _searches(built)  # the setting changed: the cache is rebuilt as int16
    matrix = INDEX.matrix(namespace_id=namespace.pk, dim=namespace.dim)
    assert matrix.vectors.dtype == np.int16 and matrix.count >= 60
    assert all(len(hits) == 20 for hits in exact)
    for want, got in zip(exact, small, strict=True):
        # The same units, each cosine within 1e-5 of float32's, in float32's order but for
        # near ties: two units whose float32 cosines differ by less than the two roundings
        # (2e-5; seen: 5e-7 apart) may come in either order.
        assert {pk for pk, _ in got} == {pk for pk, _ in want}
        cosine = dict(want)
        assert max(abs(score - cosine[pk]) for pk, score in got) < 1e-5
        rank = {pk: position for position, (pk, _) in enumerate(want)}
        swapped = [
            (a, b) for i, (a, _) in enumerate(got) for b, _ in got[i + 1 :] if rank[a] > rank[b]
        ]
        assert all(abs(cosine[a] - cosine[b]) < 2e-5 for a, b in swapped), swapped


@pytest.mark.django_db
def test_the_int16_scan_returns_float32s_nearest_chunks(built, settings):
    from memory.namespaces import backend_for_namespace

    namespace = search_namespace()
    scope = ScopeFilter(conversations=((built.pk, None),))
    query = backend_for_namespace(namespace).embed(["a kitten on the sofa"])[0]
    found = {}
    for storage in ("float32", "int16"):
        settings.LCM_VECTOR_CACHE_DTYPE = storage
        found[storage] = NumpyExactIndex().search(
            namespace_id=namespace.pk, query=query, scope=scope, k=10
        )
    assert [h.chunk_id for h in found["int16"]] == [h.chunk_id for h in found["float32"]]
    assert all(
        abs(a.similarity - b.similarity) < 1e-5
        for a, b in zip(found["int16"], found["float32"], strict=True)
    )


def test_numbers_are_their_own_stems_as_the_stemmer_says():
    """The cache fill skips the stemmer for ASCII numbers: the same terms as before."""
    import snowballstemmer

    from memory.lexical import _stem_word, stem, terms

    stemmer = snowballstemmer.stemmer("english")
    numbers = [str(i) for i in range(0, 100_000, 7)] + ["007", "2024", "0"]
    assert [stem(w) for w in numbers] == [stemmer.stemWord(w) for w in numbers]
    before = _stem_word.cache_info().currsize
    assert [stem(w) for w in numbers] == numbers
    assert _stem_word.cache_info().currsize == before  # numbers never reach the word cache
    assert terms("Item 123 mentions 4th hikes") == ["item", "123", "mention", "4th", "hike"]


def test_unit_postings_hold_each_units_term_counts_across_refreshes():
    """The inverted index, filled by refreshes of several sizes (its segments merge),
    gives every term's units and term frequencies as counting each text directly does."""
    from collections import defaultdict

    from memory.lexical import term_counts
    from memory.vectors.numpy_exact import UnitMatrix

    texts = [
        f"Ana: {TOPICS[i % 10]}, {TOPICS[(i * 3) % 10]} again, item {i % 7}" for i in range(300)
    ]
    texts[4] = ""  # a unit with no terms
    matrix = UnitMatrix(dim=2, storage="int16")
    at = 0
    for size in (1, 1, 2, 50, 3, 3, 120, 1, 119):
        matrix.grow(
            [
                (i + 1, f"chk_{i}", 1, i + 1, 1, b"\0" * 8, i + 1, texts[i], WHEN, "user")
                for i in range(at, at + size)
            ]
        )
        at += size
    assert matrix.count == 300 and len(matrix.inverted.segments) < 9
    want: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for row, text in enumerate(texts):
        counts, length = term_counts(text)
        assert matrix.doclen[row] == length
        for term, tf in counts.items():
            want[term].append((row, float(tf)))
    assert set(matrix.inverted.vocabulary) == set(want)
    for term, postings in want.items():
        rows, tfs = matrix.inverted.postings(term, 300)
        assert list(zip(rows.tolist(), tfs.tolist(), strict=True)) == postings
        rows, _ = matrix.inverted.postings(term, 100)  # a search sees the rows it was given
        assert rows.tolist() == [r for r, _ in postings if r < 100]
    assert matrix.inverted.postings("zebra", 300)[0].size == 0
    assert matrix.speaker_names == ["Ana"] and matrix.speakers[4] == -1


@pytest.mark.django_db(transaction=True)
def test_a_search_over_a_settled_cache_costs_one_check_and_one_read(
    conversation, django_assert_num_queries
):
    """Once the cache holds every row, a search asks the database only whether rows came
    (one aggregate) and reads its hits' rows; a new unit is still picked up."""
    append(conversation, *TOPICS)
    index_conversation_messages(conversation_id=conversation.pk)
    namespace = search_namespace()
    scope = ScopeFilter(conversations=((conversation.pk, None),))
    search_units(scope=scope, query="kitten", k=5, namespace=namespace)
    if connection.vendor == "sqlite":  # every visible row is settled at once
        assert not INDEX.matrix(namespace_id=namespace.pk, dim=namespace.dim).recent
    # (PostgreSQL: the newest second's rows wait a little; either way two queries)
    with django_assert_num_queries(2):
        search_units(scope=scope, query="kitten", k=5, namespace=namespace)
    append(conversation, "the harbour master rang about the mooring fee")
    index_conversation_messages(conversation_id=conversation.pk)
    hits = search_units(scope=scope, query="mooring fee", k=3, namespace=namespace).hits
    assert "mooring" in hits[0].chunk.rendered_text


def test_a_scopes_rows_and_neighbours_are_kept_and_match_a_fresh_computation():
    from memory.vectors.numpy_exact import UnitMatrix

    matrix = UnitMatrix(dim=2)
    # two conversations interleaved: 1 holds rows 0, 2, 4, ...; 2 holds rows 1, 3, 5, ...
    matrix.grow(
        [
            (i + 1, f"chk_{i}", 1 + i % 2, i // 2 + 1, 7, b"\0" * 8, i // 2 + 1, "x", WHEN, "user")
            for i in range(40)
        ]
    )
    bounded = ScopeFilter(conversations=((2, 5),))
    rows, local = matrix.scope_rows(bounded, 40)
    assert rows.tolist() == [1, 3, 5, 7, 9]
    assert local[[1, 9, 0, 11]].tolist() == [0, 4, -1, -1]
    assert matrix.scope_rows(bounded, 40)[0] is rows  # kept
    with pytest.raises(ValueError):
        local[0] = 3  # shared between searches: read-only
    before, after = matrix.neighbour_positions(rows, local, 40)
    assert before.tolist() == [-1, 0, 1, 2, 3] and after.tolist() == [1, 2, 3, 4, -1]
    again = matrix.neighbour_positions(rows.copy(), local, 40)  # not the kept array
    assert [a.tolist() for a in again] == [before.tolist(), after.tolist()]
    assert matrix.neighbour_positions(rows, local, 40)[0] is before
    owner, _ = matrix.scope_rows(ScopeFilter(owner_id=7), 30)
    assert owner.tolist() == list(range(30))
    everything, _ = matrix.scope_rows(ScopeFilter(), 40)
    assert everything.tolist() == list(range(40))
    assert matrix.scope_rows(bounded, 40)[0] is not rows  # only the last two are kept
    assert matrix.scope_rows(bounded, 40)[0].tolist() == rows.tolist()
