"""Full-text snippets mark the whole match, the same on SQLite and PostgreSQL: a
hyphenated identifier is one mark, never the pieces a parser splits it into."""

from __future__ import annotations

import pytest

from conversations.search.text import split_marks, whole_match_marks
from retrieval.grep import GrepRequest, grep_for_user
from tests.factories import append_messages

TEXT = (
    "ticket RA-2198-NS was fixed; see foo_bar v1.2.3 user@example.com "
    "path/to/file.py state-of-the-art and the deploy failed"
)


def _grep(user, query: str, scope: str = "messages") -> list[dict]:
    return grep_for_user(user=user, request=GrepRequest(query=query, mode="full_text", scope=scope))


@pytest.mark.django_db
@pytest.mark.parametrize(
    "query, marked",
    [
        ("RA-2198-NS", "«RA-2198-NS»"),
        ("ra-2198-ns", "«RA-2198-NS»"),
        ("foo_bar", "«foo_bar»"),
        ("v1.2.3", "«v1.2.3»"),
        ("user@example.com", "«user@example.com»"),
        ("path/to/file.py", "«path/to/file.py»"),
        ("state-of-the-art", "«state-of-the-art»"),
    ],
)
def test_a_full_text_snippet_marks_the_whole_identifier(user, conversation, query, marked):
    append_messages(conversation, 1, payload=lambda i: {"role": "user", "content": TEXT})
    [hit] = _grep(user, query)
    assert hit["snippet"].count("«") == 1, hit["snippet"]
    assert marked in hit["snippet"]
    text, spans = split_marks(hit["snippet"])
    assert text.strip("…") in TEXT  # a window of the content, markers aside
    assert [text[s:e] for s, e in spans] == [marked.strip("«»")]


@pytest.mark.django_db
def test_several_words_are_each_marked(user, conversation):
    append_messages(conversation, 1, payload=lambda i: {"role": "user", "content": TEXT})
    [hit] = _grep(user, "deploy failed")
    text, spans = split_marks(hit["snippet"])
    assert [text[s:e] for s, e in spans] == ["deploy", "failed"]


def test_whole_match_marks_widens_joins_and_drops_stray_pieces():
    postgres = "«RA»«-2198»-«NS» was fixed; later RA-2198 and «RA»"
    assert whole_match_marks(postgres, ["RA-2198-NS"]) == (
        "«RA-2198-NS» was fixed; later RA-2198 and RA"
    )
    assert whole_match_marks("see «foo»_«bar» now", ["foo_bar"]) == "see «foo_bar» now"
    # A stemmed match that is not the literal word stays as the backend marked it.
    assert whole_match_marks("it «failed» twice", ["failing"]) == "it «failed» twice"
    assert whole_match_marks("a «deploy» and «failed»", ["deploy", "failed"]) == (
        "a «deploy» and «failed»"
    )


def test_unpaired_markers_from_the_content_are_left_alone():
    snippet = "she wrote « bonjour «hello»"
    assert split_marks(snippet) is None
    assert whole_match_marks(snippet, ["hello"]) == snippet


@pytest.mark.django_db
@pytest.mark.parametrize("mode", ["full_text", "regex"])
def test_guillemets_in_the_content_never_look_like_markers(user, conversation, mode):
    content = "she said «bonjour» and the «deploy» failed"
    append_messages(conversation, 1, payload=lambda i: {"role": "user", "content": content})
    [hit] = grep_for_user(user=user, request=GrepRequest(query="deploy", mode=mode))
    assert "said ‹bonjour› and the ‹«deploy»› failed" in hit["snippet"]
    assert hit["snippet"].count("«") == hit["snippet"].count("»") == 1
