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
from memory.message_rank import (
    LONG_MESSAGE_UNITS,
    Messages,
    RankParams,
    expected_best,
    lexical_scale,
    long_message_chance,
    message_scores,
    z_over_matches,
)
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
        alone = next(r for r in response.json()["results"] if r["seq"] == 1)
        assert (alone["text"], alone["start_offset"]) == ("Ben: hello there.", 0)  # one unit


def test_a_long_message_gains_by_its_unit_count_only_past_the_floor():
    best = expected_best(np.array([1, 2, 6, 30]))
    assert best[0] == 0.0 and 0.5 < best[1] < 0.6  # the best of two normals: 0.56
    assert best[1] < best[2] < best[3] < 2.1
    chance = long_message_chance(np.array([1, LONG_MESSAGE_UNITS, LONG_MESSAGE_UNITS + 1, 40]))
    assert chance[0] == chance[1] == 0.0 < chance[2] < chance[3]


def _messages(unit_scores: list[np.ndarray]) -> tuple[np.ndarray, Messages]:
    """Unit scores of messages (one array each) as search's positions and their grouping."""
    sizes = np.array([len(s) for s in unit_scores])
    group = np.repeat(np.arange(len(sizes)), sizes).astype(np.int32)
    starts = np.append(0, np.cumsum(sizes)[:-1])
    messages = Messages(
        group=group,
        count=len(sizes),
        length=sizes.astype(float),
        order=np.arange(group.size),
        starts=starts,
        norm=np.ones(len(sizes)),
        chance=long_message_chance(sizes),
        others=sizes - 1,
    )
    return np.concatenate(unit_scores), messages


def test_a_long_reply_does_not_outrank_a_sure_short_match_by_its_count_alone():
    # a 40-sentence reply whose sentences vary by half a sigma (BEAM's long replies: median
    # 0.51 of the scope's spread)
    noise = np.random.default_rng(3).normal(0.0, 0.5, 40)
    lucky = noise.copy()
    lucky[np.argmax(lucky)] = 2.4  # its best unit: the luck of 40 draws
    standing_out = noise.copy()
    standing_out[7] = 6.0  # one unit far above the reply's other sentences
    params = RankParams(0.3, 0.5, message_weight=0.0, confidence=0.5)
    units, messages = _messages([np.array([2.0]), lucky, np.array([0.5, 1.9, 0.2])])
    score = message_scores(units, np.zeros(3), messages, 1.0, params)
    assert list(np.argsort(-score)) == [0, 2, 1]  # three units: no correction
    units, messages = _messages([np.array([2.0]), standing_out])
    score = message_scores(units, np.zeros(2), messages, 1.0, params)
    assert score[1] > score[0]  # a match that stands out of its message keeps its place
    without = RankParams(0.3, 0.5, 0.0, confidence=0.5, long_message_weight=0.0)
    units, messages = _messages([np.array([2.0]), lucky])
    assert np.argmax(message_scores(units, np.zeros(2), messages, 1.0, without)) == 1


def test_a_long_message_holding_the_question_words_is_not_corrected_as_luck():
    # a long tool output whose line the question quotes: its best unit is the match, not
    # the luck of its count; one sharing none of the words is corrected in full
    noise = np.random.default_rng(5).normal(0.0, 0.5, 40)
    noise[12] = 2.4
    params = RankParams(0.3, 0.5, message_weight=0.0, confidence=0.5)
    units, messages = _messages([np.array([2.0]), noise])
    held = message_scores(units, np.zeros(2), messages, 1.0, params, np.array([0.0, 1.0]))
    assert np.argmax(held) == 1 and held[1] == 2.4
    none = message_scores(units, np.zeros(2), messages, 1.0, params, np.array([0.0, 0.0]))
    assert np.argmax(none) == 0
