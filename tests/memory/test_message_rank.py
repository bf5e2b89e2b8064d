"""Issue 34: hybrid ranks messages by all their evidence, the lexical leg by its confidence,
and semantic/hybrid grep rows carry the passage a reader needs (memory.message_rank,
memory.passages)."""

import numpy as np
import pytest
from django.test import override_settings

from conversations.inputs import MessageInput
from conversations.models import Message
from conversations.services import messages_append
from memory.indexing import index_conversation_messages
from memory.message_rank import RankParams, lexical_scale, z_over_matches
from memory.passages import passage_span
from memory.recall import search_units
from memory.vectors.base import ScopeFilter

pytestmark = pytest.mark.django_db

FILLER = " ".join(
    f"Step {i} of the plan checks the weather on the coast and the wind." for i in range(10)
)


def test_a_passage_grows_over_its_message_neighbours_after_first_within_the_bound():
    tokens = [10, 20, 10, 10, 30]
    assert passage_span(tokens, 2, 10) == (2, 2)  # the unit alone
    assert passage_span(tokens, 2, 20) == (2, 3)  # the one after first
    assert passage_span(tokens, 2, 40) == (1, 3)  # then the one before
    assert passage_span(tokens, 2, 50) == (0, 3)  # after does not fit (30): before grows on
    assert passage_span(tokens, 4, 5) == (4, 4)  # a unit over the bound is returned alone
    assert passage_span([7], 0, 100) == (0, 0)


def test_the_lexical_leg_is_scaled_by_its_confidence():
    params = RankParams(0.3, 0.35, 0.6, confidence=0.5)
    assert lexical_scale(0.25, params) == 0.5
    assert lexical_scale(0.9, params) == 1.0
    assert lexical_scale(0.0, RankParams(0.3, 0.35, 0.6, confidence=0)) == 1.0
    z = z_over_matches(np.array([0.0, 2.0, 4.0, 0.0]))
    assert z[0] == z[3] == 0.0 and z[2] > 0 > z[1]


def _index(conversation, texts):
    messages_append(
        conversation_id=conversation.pk,
        messages=[MessageInput(role="user", content=text) for text in texts],
    )
    index_conversation_messages(conversation_id=conversation.pk)
    return ScopeFilter(conversations=((conversation.pk, None),))


def test_a_long_answer_holding_the_question_words_outranks_a_short_one_sharing_one(
    conversation,
):
    answer = (
        f"{FILLER} The deployment failed because the database migration locked the orders "
        f"table. We rolled the deployment back and reran the migration at night. {FILLER}"
    )
    scope = _index(
        conversation,
        ["Ana: the deployment is on Friday.", "Ben: lunch was good.", f"Ana: {answer}"],
    )
    hits = search_units(
        scope=scope, query="Why did the deployment fail and what about the migration?", k=3
    ).hits
    assert hits[0].chunk.seq_start == 3  # the whole message's evidence counts
    assert len({h.chunk.seq_start for h in hits}) == len(hits)  # one row per message


@override_settings(LCM_SEARCH_PASSAGE_TOKENS=40)
def test_semantic_and_hybrid_grep_rows_carry_the_passage_and_where_it_came_from(api, conversation):
    text = (
        "We compared three databases. It fixed the crash on startup. "
        "The cause was a stale lock file. " + FILLER
    )
    _index(conversation, ["Ben: hello there.", text])
    message = Message.objects.get(conversation=conversation, seq=2)
    for mode in ("semantic", "hybrid"):
        response = api.post(
            "/api/v1/grep/",
            {"query": "stale lock file crash", "mode": mode, "scope": "messages", "limit": 5},
            format="json",
        )
        assert response.status_code == 200, response.content
        row = next(r for r in response.json()["results"] if r["seq"] == 2)
        assert row["message_id"] == message.pk
        assert text[row["start_offset"] : row["end_offset"]] == row["text"]
        assert "stale lock file" in row["text"] or "fixed the crash" in row["text"]
        assert len(row["text"]) < len(text)  # a passage, not the message
        assert len(row["text"]) // 4 <= 48  # bounded (40 tokens, ~4 characters each)
