"""Search units, the BM25 leg, fusion and full text's any-word fallback (memory.recall)."""

import datetime as dt

import pytest

from conversations.inputs import MessageInput
from conversations.services import messages_append
from memory.chunker import Segment, unit_segments
from memory.indexing import index_conversation_messages
from memory.lexical import query_terms, speaker_label, speakers_named
from memory.models import Chunk
from memory.recall import search_units
from memory.vectors.base import ScopeFilter
from tests.memory.helpers import append

pytestmark = pytest.mark.django_db

LONG = " ".join(
    f"Paragraph {i} talks about the harbour, the ferry and the tide tables." for i in range(40)
)


def test_a_short_message_is_one_unit_and_a_long_one_is_cut_into_passages():
    short = Segment("Pixel is my new grey kitten.", "user", 1)
    long = Segment(LONG, "assistant", 2)
    units = unit_segments([short, long], unit_tokens=64)
    assert units[0].rendered_text == short.text
    assert (units[0].seq_start, units[0].seq_end) == (1, 1)
    passages = units[1:]
    assert len(passages) > 3
    assert all((u.seq_start, u.seq_end) == (2, 2) for u in passages)
    assert all(u.token_est <= 96 for u in passages)
    # passages are cut from the message without overlap: their offsets tile it in order
    assert [u.start_offset for u in passages] == sorted(u.start_offset for u in passages)
    assert all(LONG[u.start_offset : u.end_offset] == u.rendered_text for u in passages)


def test_a_sentence_longer_than_a_unit_is_cut_between_words_and_nothing_is_lost():
    words = " ".join(f"word{i}" for i in range(60))  # one 90-token sentence, no stop
    text = f"Short opener. {words} and a tail."
    units = unit_segments([Segment(text, "user", 7)], unit_tokens=24)
    assert len(units) >= 4
    assert all(u.token_est <= 36 for u in units)
    # every word is in exactly one unit, in order, and offsets point into the message
    assert " ".join(u.rendered_text for u in units).split() == text.split()
    assert all(text[u.start_offset : u.end_offset] == u.rendered_text for u in units)
    assert all(not u.rendered_text.startswith(" ") for u in units)


def test_query_terms_are_stemmed_without_stop_words():
    assert query_terms("What did Ben say about hiking and the hikes?") == ["ben", "hike"]


def test_speakers_named_in_a_question_are_found_and_taken_out():
    assert speaker_label("Fahim Khan: I went for a run") == "Fahim Khan"
    assert speaker_label("I went for a run: it rained") is None
    names = ["Fahim Khan", "Muhhamed", "Emi"]
    assert speakers_named("When did Fahim go running with Muhhamed?", names) == (
        {0, 1},
        "When did go running with ?",
    )
    assert speakers_named("What is fahim khan's dog called?", names) == ({0}, "What is dog called?")
    assert speakers_named("Who likes emissions?", names) == (set(), "Who likes emissions?")


def _conversation_with_units(conversation):
    base = dt.datetime(2024, 3, 1, tzinfo=dt.UTC)
    texts = [
        "Ben: I went hiking near the glacier lake with my sister.",
        "Ana: I adopted a grey kitten called Pixel.",
        "Ben: Pixel is a lovely name.",
        "Ana: My new job at the bakery starts on Monday.",
        LONG,
    ]
    messages_append(
        conversation_id=conversation.pk,
        messages=[
            MessageInput(role="user", content=text, created_at=base + dt.timedelta(days=20 * i))
            for i, text in enumerate(texts)
        ],
    )
    index_conversation_messages(conversation_id=conversation.pk)


def test_search_ranks_any_word_by_bm25_one_unit_per_message(conversation):
    _conversation_with_units(conversation)
    scope = ScopeFilter(conversations=((conversation.pk, None),))
    # full text: only units holding a query term, stems matching ("hikes" finds "hiking")
    found = search_units(scope=scope, query="Who hikes near glaciers?", k=10, mode="full_text")
    assert [h.chunk.seq_start for h in found.hits] == [1]
    assert found.hits[0].bm25 > 0
    # hybrid: every unit in scope is ranked, the long message's passages count as one
    hybrid = search_units(scope=scope, query="ferry tide tables", k=10, mode="hybrid")
    assert hybrid.hits[0].chunk.seq_start == 5
    assert hybrid.hits[0].matched_by == "both"
    assert sorted(h.chunk.seq_start for h in hybrid.hits) == [1, 2, 3, 4, 5]
    assert Chunk.objects.filter(conversation=conversation, seq_start=5).count() > 3
    scores = [h.score for h in hybrid.hits]
    assert scores == sorted(scores, reverse=True)
    # another conversation's units are out of scope
    other = ScopeFilter(conversations=((conversation.pk + 1, None),))
    assert search_units(scope=other, query="kitten", k=5).hits == []


def test_a_hit_in_a_long_message_is_the_sentence_that_matches(conversation):
    # the default unit is about a sentence: a reader pays for the match, not the message
    filler = " ".join(
        f"Sentence {i} is about the weather on the coast and the wind." for i in range(12)
    )
    text = f"{filler} My sister Clara adopted a three-legged greyhound named Biscuit. {filler}"
    messages_append(
        conversation_id=conversation.pk,
        messages=[
            MessageInput(role="user", content="Ana: I bought new running shoes."),
            MessageInput(role="assistant", content=f"Ben: {text}"),
        ],
    )
    index_conversation_messages(conversation_id=conversation.pk)
    scope = ScopeFilter(conversations=((conversation.pk, None),))
    hits = search_units(scope=scope, query="Which dog did Clara adopt?", k=5).hits
    assert hits[0].chunk.seq_start == hits[0].chunk.seq_end == 2
    assert "greyhound named Biscuit" in hits[0].chunk.rendered_text
    assert hits[0].chunk.token_est <= 36
    assert [h.chunk.seq_start for h in hits] == [2, 1]  # one unit per message


def test_full_text_grep_on_a_question_falls_back_to_ranked_any_word_rows(api, conversation):
    append(
        conversation,
        "I adopted a grey kitten called Pixel.",
        "The bakery job starts on Monday.",
        "We hiked to the glacier lake.",
    )
    index_conversation_messages(conversation_id=conversation.pk)
    question = "What is the name of the kitten she adopted last spring?"
    response = api.post(
        "/api/v1/grep/",
        {"query": question, "mode": "full_text", "scope": "messages", "sort": "relevance"},
        format="json",
    )
    assert response.status_code == 200, response.content
    results = response.json()["results"]
    assert [(r["type"], r["seq"], r["matched"]) for r in results] == [("message", 1, "any_word")]
    assert results[0]["snippet"] == "I adopted a grey kitten called Pixel."
    assert results[0]["covered_by"] is None
    # a query whose words are all in one message is answered as before, unflagged
    exact = api.post(
        "/api/v1/grep/", {"query": "grey kitten", "mode": "full_text"}, format="json"
    ).json()["results"]
    assert [r["seq"] for r in exact] == [1]
    assert "matched" not in exact[0]
    # one word that is nowhere: nothing, and no fallback
    none = api.post("/api/v1/grep/", {"query": "zeppelin", "mode": "full_text"}, format="json")
    assert none.json()["results"] == []
