"""Questions about the order of events (memory.event_order, and search_units' use of it)."""

import datetime as dt

import numpy as np
import pytest

from conversations.inputs import MessageInput
from conversations.services import messages_append
from memory.event_order import (
    about_own_words,
    ordering_question,
    sessions_of,
    spread_by_session,
    topic_of,
)
from memory.indexing import index_conversation_messages
from memory.namespaces import search_namespace
from memory.recall import search_units
from memory.vectors.base import ScopeFilter
from memory.vectors.numpy_exact import INDEX

ASKED = (
    "Can you list the order in which I brought up different aspects of developing my "
    "garden shed throughout our conversations, in order? Mention ONLY and ONLY three items."
)


def test_an_ordering_question_is_recognised_and_asked_by_its_topic():
    assert ordering_question(ASKED)
    assert ordering_question("In what order did we fix the login bugs?")
    assert ordering_question("Can you walk me through the order in which I raised the budget?")
    assert not ordering_question("What did I order for dinner?")
    assert not ordering_question("Where did we put the couch?")
    assert about_own_words(ASKED)
    assert not about_own_words("In what order did the releases ship?")
    assert topic_of(ASKED) == "developing my garden shed"
    # nothing but framing: the question is asked as it is
    assert topic_of("In what order?") == "In what order?"


def test_sessions_start_at_a_pause_or_another_conversation():
    hour = 3600.0
    times = np.array([0, 60, 120, 5 * hour, 5 * hour + 60, 0])
    conversations = np.array([1, 1, 1, 1, 1, 2])
    seqs = np.array([1, 2, 3, 4, 5, 1])
    assert sessions_of(times, conversations, seqs).tolist() == [0, 0, 0, 1, 1, 2]


def test_the_spread_takes_each_sessions_best_before_a_second_of_the_same_session():
    score = np.array([3.0, 2.9, 2.8, 1.5, 1.0, -np.inf])
    sessions = np.array([0, 0, 0, 1, 2, 3])
    # by score alone: 0, 1, 2, 3; each message already taken costs its session 1.0, so
    # the third of session 0 (2.8 - 2) comes after the other sessions' best
    assert spread_by_session(score, sessions, 4) == [0, 1, 3, 4]
    assert spread_by_session(score, sessions, 10) == [0, 1, 3, 4, 2]  # -inf never comes
    assert spread_by_session(score, sessions, 0) == []


@pytest.mark.django_db
def test_an_ordering_question_finds_the_users_mentions_in_every_session(conversation):
    """The user brings the shed up once a session; the assistant repeats its words at
    length in the first session. Asked in what order the user brought it up, the three
    mentions, one per session, come first: only the user's messages, spread by session."""
    day = dt.datetime(2024, 5, 1, 9, tzinfo=dt.UTC)
    sessions = [
        [
            ("user", "I want to build a garden shed with a pitched roof this summer."),
            ("assistant", "A garden shed with a pitched roof: garden shed roof framing."),
            ("assistant", "For the garden shed, the roof and shed walls matter most."),
            ("assistant", "Garden shed tip: build the shed floor before the roof."),
        ],
        [
            ("user", "The weather was lovely at the beach today."),
            ("user", "Back to my garden shed: which wood should the walls use?"),
            ("assistant", "Cedar is a good choice."),
        ],
        [
            ("user", "Tonight I cooked a curry for my neighbours."),
            ("user", "The garden shed is finished, should I paint it green?"),
            ("assistant", "Green works well."),
        ],
    ]
    messages, seq, expected = [], 0, []
    for number, session in enumerate(sessions):
        for minute, (role, text) in enumerate(session):
            seq += 1
            when = day + dt.timedelta(days=7 * number, minutes=minute)
            messages.append(MessageInput(role=role, content=text, created_at=when))
            if role == "user" and "shed" in text:
                expected.append(seq)
    messages_append(conversation_id=conversation.pk, messages=messages)
    index_conversation_messages(conversation_id=conversation.pk)
    scope = ScopeFilter(conversations=((conversation.pk, None),))
    asked = ASKED.replace("developing my garden shed", "my garden shed")
    found = search_units(scope=scope, query=asked, k=3, mode="hybrid")
    assert sorted(h.chunk.seq_start for h in found.hits) == expected
    assert found.stats["order_of_events"] == {"topic": "my garden shed", "own_words": True}
    # the unit cache knows each unit's role and time (read with its vector)
    namespace = search_namespace()
    matrix = INDEX.matrix(namespace_id=namespace.pk, dim=namespace.dim)
    assert matrix.from_user[: matrix.count].sum() == 5
    assert matrix.times[: matrix.count].max() - matrix.times[: matrix.count].min() > 14 * 86400
    # asked plainly, the assistant's repetitions of the words rank among the first three
    plain = search_units(scope=scope, query="my garden shed", k=3, mode="hybrid")
    assert sorted(h.chunk.seq_start for h in plain.hits) != expected
