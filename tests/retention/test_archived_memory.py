"""The semantic memory of archived content (memory.archived_content_policy,
docs/retention.md): the policy compresses vectors (float16, int8) and drops memory full-text
rows; searches still show the text; restore brings the full-text rows back and the vectors
to float32."""

from __future__ import annotations

import numpy as np
import pytest
from django.db import IntegrityError, connection, transaction

from conversations.models import Message
from memory.fulltext import search_chunks
from memory.indexing import index_conversation_messages
from memory.models import Chunk, ChunkVector
from memory.vectors import ScopeFilter
from memory.vectors.codec import (
    FLOAT16,
    FLOAT32,
    INT8,
    decode_vector,
    decode_vectors,
    encode_vector,
    stored_length,
    vector_format,
)
from memory.vectors.numpy_exact import INDEX
from retention.models import RetentionPolicy
from retention.services import (
    retention_apply,
    retention_memory_apply,
    retention_plan,
    retention_restore,
    retention_status,
)
from tests.memory.helpers import append
from tests.retrieval.dag_builder import build_dag

pytestmark = pytest.mark.usefixtures("offline_engine", "fresh_vector_caches")

FACT = "Note for later: the automobile is stored in the green crate beside the boiler."
FILLER = "The quarterly report needs two more charts."


def _unit(dim: int, seed: int) -> np.ndarray:
    vector = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return vector / np.linalg.norm(vector)


@pytest.mark.parametrize("dim", [2, 3, 4, 8, 384])
@pytest.mark.parametrize(("fmt", "tolerance"), [(FLOAT32, 0.0), (FLOAT16, 1e-3), (INT8, 1e-2)])
def test_codec_round_trips_within_the_format_precision(dim, fmt, tolerance):
    vector = _unit(dim, dim)
    blob = encode_vector(vector, fmt)
    assert len(blob) == stored_length(fmt, dim)
    assert vector_format(blob, dim) == fmt
    decoded = decode_vector(blob, dim)
    assert decoded.dtype == np.float32 and decoded.shape == (dim,)
    assert float(np.max(np.abs(decoded - vector))) <= tolerance
    matrix = decode_vectors([encode_vector(_unit(dim, 1)), blob], dim)
    assert matrix.shape == (2, dim) and np.array_equal(matrix[1], decoded)


def test_codec_refuses_a_blob_of_another_dimension():
    with pytest.raises(ValueError, match="no 5-dimensional vector"):
        decode_vector(encode_vector(_unit(4, 0), FLOAT16), 5)


def _conversation_with_fact(conversation, settings):
    settings.LCM_CHUNK_TOPIC_SHIFT = 2.0
    append(conversation, FACT, *[f"{FILLER} ({i})" for i in range(11)])
    build_dag(conversation, leaf_size=4, fanout=2, max_depth=1, tail=4)
    index_conversation_messages(conversation_id=conversation.pk)


def _archive(conversation, *, vectors: str, fulltext: str):
    RetentionPolicy.objects.create(conversation=conversation, keep_newest_tokens=1,
                                   archived_vectors=vectors, archived_fulltext=fulltext)  # fmt: skip
    result = retention_apply(ranges=retention_plan(conversations=[conversation]))
    assert result.messages == 8
    INDEX.reset()  # a fresh process: the cache loads (and decodes) what is stored now
    return result


def _fact_chunk(conversation) -> Chunk:
    return Chunk.objects.get(conversation=conversation, rendered_text=FACT)


def _formats(conversation) -> dict[str, str]:
    rows = ChunkVector.objects.filter(chunk__conversation=conversation).values_list(
        "chunk__seq_end", "vector", "namespace__dim"
    )
    return {f"{'archived' if end <= 8 else 'live'}:{vector_format(v, d)}" for end, v, d in rows}


def _grep(api, conversation, **body) -> list[dict]:
    response = api.post("/api/v1/grep/", {"conversation_id": conversation.pk, "limit": 20,
                                          "scope": "messages", **body}, format="json")  # fmt: skip
    assert response.status_code == 200, response.content
    return response.json()["results"]


def _found(rows: list[dict]) -> str:
    """How the archived fact was found: by a chunk (its text shown), a message read from
    the archive, or not at all."""
    for row in rows:
        if row["type"] == "chunk" and row["snippet"] == FACT:
            return "chunk"
        if row["type"] == "message" and row.get("seq") == 1:
            return "archive" if row.get("from_archive") else "database"
    return "missed"


# What each grep mode finds of an archived message, for each policy (docs/retention.md):
# semantic and hybrid rank memory units (vectors, compressed or not, and the kept chunk
# text), so they find it whatever the policy; full_text and regex search messages, whose
# content left the database, so only include_archived (a segment scan) finds it.
EXPECTED = {
    ("semantic", False): "chunk",
    ("semantic", True): "chunk",
    ("hybrid", False): "chunk",
    ("hybrid", True): "chunk",
    ("full_text", False): "missed",
    ("full_text", True): "archive",
    ("regex", False): "missed",
    ("regex", True): "archive",
}
QUERIES = {
    "semantic": "Where did we put the car?",
    "hybrid": "Where did we put the car?",
    "full_text": "automobile",
    "regex": r"automobile is stored",
}


def grep_matrix(api, conversation) -> dict[tuple[str, bool], str]:
    """How each grep mode, with and without include_archived, finds the archived fact."""
    return {
        (mode, include): _found(
            _grep(api, conversation, mode=mode, query=QUERIES[mode], include_archived=include)
        )
        for mode in QUERIES
        for include in (False, True)
    }


@pytest.mark.parametrize("fulltext", ["keep", "drop"])
@pytest.mark.parametrize("vectors", ["keep", FLOAT16, INT8])
def test_grep_over_archived_content_for_each_policy(api, conversation, settings, vectors,
                                                    fulltext):  # fmt: skip
    _conversation_with_fact(conversation, settings)
    fact_scope = ScopeFilter(conversations=((conversation.pk, None),))
    assert [c for c, _ in search_chunks(query="automobile", scope=fact_scope, k=5)] == [
        _fact_chunk(conversation).pk
    ]

    result = _archive(conversation, vectors=vectors, fulltext=fulltext)

    stored = {"keep": FLOAT32}.get(vectors, vectors)
    assert _formats(conversation) == {f"archived:{stored}", "live:float32"}
    archived = Chunk.objects.filter(conversation=conversation, seq_end__lte=8).count()
    assert archived == ChunkVector.objects.filter(chunk__seq_end__lte=8).count() >= 2
    assert result.memory["vectors_compressed"] == (0 if vectors == "keep" else archived)
    assert result.memory["fulltext_dropped"] == (archived if fulltext == "drop" else 0)
    assert (_fact_chunk(conversation).fulltext_dropped_at is not None) == (fulltext == "drop")
    # memory_search's full-text leg (memory.fulltext) follows the full-text policy
    memory_fulltext = [c for c, _ in search_chunks(query="automobile", scope=fact_scope, k=5)]
    assert memory_fulltext == ([] if fulltext == "drop" else [_fact_chunk(conversation).pk])
    assert grep_matrix(api, conversation) == EXPECTED


def test_restore_brings_full_text_rows_back_and_vectors_to_float32(api, conversation, settings):
    _conversation_with_fact(conversation, settings)
    before = {
        pk: decode_vector(v, d)
        for pk, v, d in ChunkVector.objects.filter(chunk__conversation=conversation).values_list(
            "pk", "vector", "namespace__dim"
        )
    }
    texts = dict(Chunk.objects.filter(conversation=conversation).values_list("pk", "rendered_text"))
    contents = list(
        Message.objects.filter(conversation=conversation).order_by("seq").values_list("content")
    )
    _archive(conversation, vectors=INT8, fulltext="drop")
    status = retention_status(conversations=[conversation])
    archived = Chunk.objects.filter(conversation=conversation, seq_end__lte=8).count()
    assert (status["memory_compressed_vectors"], status["memory_fulltext_dropped_chunks"]) == (
        archived,
        archived,
    )

    assert retention_restore(conversation=conversation) == 8

    assert _formats(conversation) == {"archived:float32", "live:float32"}
    assert not Chunk.objects.filter(fulltext_dropped_at__isnull=False).exists()
    assert list(
        Message.objects.filter(conversation=conversation).order_by("seq").values_list("content")
    ) == (contents)
    assert dict(Chunk.objects.filter(conversation=conversation).values_list(
        "pk", "rendered_text")) == texts  # fmt: skip
    after = ChunkVector.objects.filter(chunk__conversation=conversation).values_list(
        "pk", "vector", "namespace__dim"
    )
    # vectors are derived data: float32 again, equal to the int8 values (within 1e-2)
    for pk, vector, dim in after:
        assert float(np.max(np.abs(decode_vector(vector, dim) - before[pk]))) <= 1e-2
    scope = ScopeFilter(conversations=((conversation.pk, None),))
    assert [c for c, _ in search_chunks(query="automobile", scope=scope, k=5)] == [
        _fact_chunk(conversation).pk
    ]
    status = retention_status(conversations=[conversation])
    assert (status["memory_compressed_vectors"], status["memory_fulltext_dropped_chunks"]) == (0, 0)


def test_a_later_policy_change_is_caught_up_and_never_widens_vectors(conversation, settings):
    _conversation_with_fact(conversation, settings)
    _archive(conversation, vectors=INT8, fulltext="drop")
    RetentionPolicy.objects.filter(conversation=conversation).update(
        archived_vectors=FLOAT16, archived_fulltext="keep"
    )

    result = retention_memory_apply()

    archived = Chunk.objects.filter(conversation=conversation, seq_end__lte=8).count()
    assert result.as_dict() == {"vectors_compressed": 0, "vectors_expanded": 0,
                                "fulltext_dropped": 0, "fulltext_restored": archived,
                                "text_archived": 0, "text_kept": 0,
                                "text_restored": 0}  # fmt: skip
    assert _formats(conversation) == {"archived:int8", "live:float32"}
    assert retention_memory_apply().as_dict() == dict.fromkeys(result.as_dict(), 0)


def test_a_chunk_with_a_live_message_is_not_compressed(conversation, settings):
    """A chunk is archived only when every message it covers is: the chunk of seq 8-9
    straddles the archived range's end."""
    settings.LCM_CHUNK_TOPIC_SHIFT = 2.0
    append(conversation, *[f"{FILLER} ({i})" for i in range(12)])
    build_dag(conversation, leaf_size=4, fanout=2, max_depth=1, tail=4)
    index_conversation_messages(conversation_id=conversation.pk)
    chunks = list(Chunk.objects.filter(conversation=conversation).values_list(
        "seq_start", "seq_end"))  # fmt: skip
    _archive(conversation, vectors=FLOAT16, fulltext="drop")
    dropped = set(
        Chunk.objects.filter(
            conversation=conversation, fulltext_dropped_at__isnull=False
        ).values_list("seq_start", "seq_end")
    )
    assert dropped == {(s, e) for s, e in chunks if e <= 8}


@pytest.mark.parametrize("column", ["rendered_text", "seq_end", "content_hash"])
def test_the_database_still_refuses_other_changes_to_chunks(conversation, settings, column):
    _conversation_with_fact(conversation, settings)
    chunk = _fact_chunk(conversation)
    value = 99 if column == "seq_end" else "changed"
    with pytest.raises(IntegrityError), transaction.atomic():
        Chunk.objects.filter(pk=chunk.pk).update(**{column: value})
    assert getattr(Chunk.objects.get(pk=chunk.pk), column) == getattr(chunk, column)


def test_the_database_refuses_to_move_a_vector_to_another_chunk(conversation, settings):
    _conversation_with_fact(conversation, settings)
    first, second = ChunkVector.objects.filter(chunk__conversation=conversation)[:2]
    with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "UPDATE memory_chunkvector SET chunk_id = %s WHERE id = %s",
            [second.chunk_id, first.pk],
        )
    assert ChunkVector.objects.get(pk=first.pk).chunk_id == first.chunk_id


@pytest.mark.parametrize("field", ["archived_vectors", "archived_fulltext"])
def test_the_database_refuses_an_unknown_memory_policy(user, field):
    with pytest.raises(IntegrityError), transaction.atomic():
        RetentionPolicy.objects.create(user=user, **{field: "float8"})
    assert not RetentionPolicy.objects.exists()


def _fts_consistent() -> None:
    """SQLite: FTS5's own check of its index (raises "malformed" if not). Against the
    content table too (rank 1) when no unit's row is dropped on purpose: that catches a
    'delete' sent for a row the index never had (what migration 0005's guard prevents)."""
    if connection.vendor != "sqlite":
        return
    full = not Chunk.objects.filter(fulltext_dropped_at__isnull=False).exists()
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO memory_chunk_fts(memory_chunk_fts, rank) VALUES ('integrity-check', %s)",
            [1 if full else 0],
        )


def test_hard_deleting_a_conversation_with_dropped_full_text_rows(conversation, settings, user):
    from conversations.models import Conversation
    from security.hard_delete import hard_delete_conversation

    _conversation_with_fact(conversation, settings)
    _archive(conversation, vectors=FLOAT16, fulltext="drop")
    _fts_consistent()

    hard_delete_conversation(conversation=conversation, confirm=str(conversation.pk), actor=user,
                             via="test")  # fmt: skip

    assert not Conversation.objects.filter(pk=conversation.pk).exists()
    assert not Chunk.objects.exists() and not ChunkVector.objects.exists()
    _fts_consistent()


def test_full_text_rows_dropped_and_put_back_keep_the_index_consistent(conversation, settings):
    _conversation_with_fact(conversation, settings)
    _archive(conversation, vectors="keep", fulltext="drop")
    _fts_consistent()
    retention_restore(conversation=conversation)
    _fts_consistent()
    scope = ScopeFilter(conversations=((conversation.pk, None),))
    assert [c for c, _ in search_chunks(query="automobile", scope=scope, k=5)] == [
        _fact_chunk(conversation).pk
    ]


def test_the_command_catches_up_a_policy_changed_after_archiving(conversation, settings):
    import json
    from io import StringIO

    from django.core.management import call_command

    _conversation_with_fact(conversation, settings)
    _archive(conversation, vectors="keep", fulltext="keep")
    RetentionPolicy.objects.filter(conversation=conversation).update(archived_vectors=FLOAT16)
    out = StringIO()

    call_command("lcm_retention", "apply", "--json", stdout=out)

    result = json.loads(out.getvalue())
    archived = Chunk.objects.filter(conversation=conversation, seq_end__lte=8).count()
    assert (result["messages"], result["memory"]["vectors_compressed"]) == (0, archived)
    assert _formats(conversation) == {"archived:float16", "live:float32"}
