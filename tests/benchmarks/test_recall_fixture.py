"""The recall fixture's shapes (benchmarks/recall_fixture.py), checked without a database."""

from benchmarks.recall_fixture import _stem_set, passing_messages


def test_facts_said_in_passing_end_an_ordinary_message_sharing_no_word_with_the_question():
    rows, facts = passing_messages(total=400, facts=12)
    assert len(rows) == 400 and len(facts) == 12
    for fact in facts:
        role, text = rows[fact.seq - 1]
        assert (role, text) == ("user", fact.message)
        assert text.endswith(" " + fact.fact)
        assert 40 <= len(text.split()) <= 130  # an ordinary message of realistic length
        assert not _stem_set(fact.question) & _stem_set(text)
    assert passing_messages(total=400, facts=12) == (rows, facts)  # deterministic
