"""Search by meaning over archived messages: their memory chunks and vectors stay (this
version neither compresses nor drops them), and indexing after archiving reads the content
back from the segment."""

from __future__ import annotations

import pytest

from archive.services import segment_archive
from conversations.models import Message
from memory.indexing import index_conversation_messages
from memory.models import Chunk
from tests.memory.helpers import append
from tests.retrieval.dag_builder import build_dag

pytestmark = pytest.mark.usefixtures("offline_engine", "fresh_vector_caches")

FACT = "Note for later: the automobile is stored in the green crate beside the boiler."
FILLER = "The quarterly report needs two more charts."


@pytest.mark.parametrize("index_before_archiving", [True, False])
def test_semantic_grep_finds_an_archived_message(api, conversation, settings,
                                                 index_before_archiving):  # fmt: skip
    settings.LCM_CHUNK_TOPIC_SHIFT = 2.0
    append(conversation, FACT, *[f"{FILLER} ({i})" for i in range(11)])
    build_dag(conversation, leaf_size=4, fanout=2, max_depth=1, tail=4)
    if index_before_archiving:
        index_conversation_messages(conversation_id=conversation.pk)
    archived = segment_archive(conversation=conversation, seq_from=1, seq_to=12)
    assert archived.archived == 8
    assert Message.objects.get(conversation=conversation, seq=1).content == ""
    if not index_before_archiving:
        index_conversation_messages(conversation_id=conversation.pk)

    response = api.post("/api/v1/grep/", {"query": "Where did we put the car?",
                                          "mode": "semantic"}, format="json")  # fmt: skip

    assert response.status_code == 200, response.content
    top = response.json()["results"][0]
    assert (top["type"], top["snippet"], top["seq"]) == ("chunk", FACT, 1)
    assert Chunk.objects.filter(
        conversation=conversation, rendered_text__contains="automobile"
    ).exists()
