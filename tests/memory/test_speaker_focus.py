"""Questions about one speaker (memory.speaker_focus, and hybrid search's use of it): the
answer needs a fact from each of two sessions, both said by the speaker the question names."""

import datetime as dt

import numpy as np
import pytest

from conversations.inputs import MessageInput
from conversations.services import messages_append
from memory.indexing import index_conversation_messages
from memory.message_rank import message_groups
from memory.namespaces import search_namespace
from memory.recall import search_units
from memory.speaker_focus import speaker_focus
from memory.vectors.base import ScopeFilter
from memory.vectors.numpy_exact import INDEX

# Two sessions a week apart. Ana names her pets once in each; Ben talks about his own pets
# at length in both, in the question's words.
SESSIONS = [
    [
        ("Ana", "Good morning! How was your weekend?"),
        ("Ben", "Great, my pets kept me busy. My dog and my cat are the best pets anyone has."),
        ("Ana", "My cat Tofu slept on my keyboard all weekend."),
        ("Ben", "My pets are my family, I feed my pets twice a day."),
        ("Ben", "Do you have pets? I take my dog to the pet park and my cat stays home."),
    ],
    [
        ("Ben", "I bought new toys for my pets, the dog and the cat love them."),
        ("Ana", "We adopted a puppy called Biscuit from the shelter on Saturday!"),
        ("Ben", "Pets make every day better, my cat and dog agree."),
        ("Ana", "I started a pottery class on Thursdays."),
    ],
]
ASKED = "What pets does Ana have?"


def _ingest(conversation) -> list[int]:
    """The sessions stored and indexed; the seqs of Ana's two pet lines."""
    day = dt.datetime(2024, 3, 2, 10, tzinfo=dt.UTC)
    messages, expected, seq = [], [], 0
    for number, session in enumerate(SESSIONS):
        for minute, (speaker, text) in enumerate(session):
            seq += 1
            when = day + dt.timedelta(days=7 * number, minutes=minute)
            role = "user" if speaker == "Ana" else "assistant"
            messages.append(MessageInput(role=role, content=f"{speaker}: {text}", created_at=when))
            if speaker == "Ana" and ("Tofu" in text or "Biscuit" in text):
                expected.append(seq)
    messages_append(conversation_id=conversation.pk, messages=messages)
    index_conversation_messages(conversation_id=conversation.pk)
    return expected


@pytest.mark.django_db
@pytest.mark.embedding_model
def test_a_question_naming_one_speaker_finds_that_speakers_fact_in_each_session(
    conversation, settings
):
    expected = _ingest(conversation)
    scope = ScopeFilter(conversations=((conversation.pk, None),))

    found = search_units(scope=scope, query=ASKED, k=2, mode="hybrid")
    assert sorted(h.chunk.seq_start for h in found.hits) == expected

    # without the focus, Ben's lines about his own pets take one of the first two rows
    settings.LCM_SEARCH_SPEAKER_WEIGHT = 0
    plain = search_units(scope=scope, query=ASKED, k=2, mode="hybrid")
    assert sorted(h.chunk.seq_start for h in plain.hits) != expected


@pytest.mark.django_db
def test_a_question_naming_both_speakers_or_none_is_ranked_as_before(conversation, settings):
    _ingest(conversation)
    scope = ScopeFilter(conversations=((conversation.pk, None),))
    for question in ("What pets do Ana and Ben have?", "What pets are there?"):
        focused = search_units(scope=scope, query=question, k=9, mode="hybrid")
        settings.LCM_SEARCH_SPEAKER_WEIGHT = 0
        plain = search_units(scope=scope, query=question, k=9, mode="hybrid")
        settings.LCM_SEARCH_SPEAKER_WEIGHT = 2.5
        assert [h.chunk.pk for h in focused.hits] == [h.chunk.pk for h in plain.hits]


@pytest.mark.django_db
def test_the_focus_raises_only_the_named_speakers_messages(conversation):
    _ingest(conversation)
    namespace = search_namespace()
    matrix = INDEX.matrix(namespace_id=namespace.pk, dim=namespace.dim)
    scope = ScopeFilter(conversations=((conversation.pk, None),))
    rows, _ = matrix.scope_rows(scope, matrix.count)
    messages = message_groups(matrix, rows, matrix.count)
    ana = matrix.speaker_ids["Ana"]
    score = np.zeros(messages.count)
    raised = speaker_focus(score, matrix, rows, messages, {ana}, 2.5)
    first = rows[messages.order[messages.starts]]
    assert raised.tolist() == [2.5 if s == ana else 0.0 for s in matrix.speakers[first]]
    assert (raised > 0).sum() == 4  # Ana's four lines
    # two speakers named, or a weight of 0: unchanged
    ben = matrix.speaker_ids["Ben"]
    assert speaker_focus(score, matrix, rows, messages, {ana, ben}, 2.5) is score
    assert speaker_focus(score, matrix, rows, messages, {ana}, 0.0) is score
