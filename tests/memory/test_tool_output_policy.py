"""LCM_MEMORY_EMBED_TOOL_RESULT_TOKENS: a long tool result's middle units are stored and found
by their words, not embedded; short tool results and other messages are embedded as before."""

import numpy as np
import pytest

from memory import tool_output_policy
from memory.chunker import Segment, unit_segments
from memory.indexing import index_conversation_messages
from memory.models import Chunk, ChunkVector, NamespaceStatus
from memory.namespaces import model_change_start
from memory.recall import search_units
from memory.reindex import reindex_namespace
from memory.vectors import ScopeFilter
from tests.memory.helpers import append

LIMIT = 120


def _log(marker: str = "quokka") -> str:
    """A long tool output (~600 tokens): numbered log lines, one naming `marker` midway."""
    lines = [f"line {i}: worker {i % 7} finished step {i} in {i * 3} ms" for i in range(60)]
    lines[30] = f"line 30: the {marker} migration failed with a lock timeout"
    return "\n".join(lines)


def _cut(texts_and_tools: list[tuple[str, bool]], limit: int):
    segments = [
        Segment(text=text, role="tool" if tool else "user", seq=i + 1, is_tool_result=tool)
        for i, (text, tool) in enumerate(texts_and_tools)
    ]
    units = unit_segments(segments, unit_tokens=24)
    return tool_output_policy.apply(units, segments, limit=limit)


def test_only_the_head_and_tail_of_a_long_tool_result_are_embedded():
    units = _cut([(_log(), True), ("ok", True), (_log(), False)], LIMIT)
    long_tool = [u for u in units if u.seq_start == 1]
    embedded = [u for u in long_tool if u.embedded]
    assert 0 < len(embedded) < len(long_tool)
    assert long_tool[0].embedded and long_tool[-1].embedded
    assert not any(u.embedded for u in long_tool if "quokka" in u.rendered_text)
    head = sum(u.token_est for u in embedded[: len(embedded) // 2])
    assert head <= LIMIT  # about half the limit from each end
    # a short tool result and a long non-tool message: every unit embedded, as before
    assert all(u.embedded for u in units if u.seq_start != 1)


def test_limit_zero_embeds_every_unit():
    assert all(u.embedded for u in _cut([(_log(), True)], 0))


@pytest.mark.django_db
def test_a_long_tool_result_is_stored_whole_and_found_by_its_words(conversation, settings):
    settings.LCM_MEMORY_EMBED_TOOL_RESULT_TOKENS = LIMIT
    append(conversation, _log(), "build passed", role="tool")
    result = index_conversation_messages(conversation_id=conversation.pk)

    chunks = Chunk.objects.filter(conversation=conversation)
    lexical = chunks.filter(lexical_only=True)
    assert result.chunks_created == chunks.count()
    assert 0 < lexical.count() < chunks.count()
    # every unit has a row in the search matrix; a lexical-only one a zero vector
    assert result.vectors_created == chunks.count()
    assert _zero_vectors(lexical) == lexical.count()
    assert _zero_vectors(chunks.exclude(lexical_only=True)) == 0
    assert chunks.get(seq_start=2).lexical_only is None
    assert "".join(c.rendered_text for c in chunks.filter(seq_start=1)).count("quokka") == 1

    scope = ScopeFilter(conversations=((conversation.pk, None),))
    full_text = search_units(scope=scope, query="quokka migration", k=3, mode="full_text")
    assert "quokka" in full_text.hits[0].chunk.rendered_text
    # hybrid ranks messages: the long result first (its unit with no vector is neutral in
    # the semantic leg, not a low score that would sink the message: memory.recall)
    hybrid = search_units(scope=scope, query="quokka migration", k=3, mode="hybrid")
    assert [hit.chunk.seq_start for hit in hybrid.hits] == [1, 2]


def _zero_vectors(chunks) -> int:
    blobs = ChunkVector.objects.filter(chunk__in=chunks).values_list("vector", flat=True)
    return sum(not np.frombuffer(bytes(b), "<f4").any() for b in blobs)


@pytest.mark.django_db
def test_a_reindex_leaves_lexical_only_units_unembedded(conversation, settings):
    settings.LCM_MEMORY_EMBED_TOOL_RESULT_TOKENS = LIMIT
    append(conversation, _log(), role="tool")
    index_conversation_messages(conversation_id=conversation.pk)
    lexical = Chunk.objects.filter(lexical_only=True)
    assert lexical.exists()

    settings.LCM_EMBEDDING_BACKEND = "static"
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "sync": False}
    building = model_change_start()
    done = reindex_namespace(namespace_id=building.pk)
    assert done.status == NamespaceStatus.ACTIVE
    assert done.chunks_done == done.chunks_total == Chunk.objects.count()
    new = ChunkVector.objects.filter(namespace=done)
    assert _zero_vectors(lexical) == 2 * lexical.count()  # in both namespaces
    assert new.count() == Chunk.objects.count()
