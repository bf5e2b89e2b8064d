"""grep over messages and summaries, in both modes, on the configured database."""

from __future__ import annotations

import datetime as dt

import pytest
from django.test import override_settings
from django.utils import timezone

from conversations.search import InvalidPattern, SearchTimeout
from core.api.errors import InvalidInput, NotFound
from retrieval.grep import GrepRequest, grep_for_user
from tests.factories import append_messages
from tests.retrieval.dag_builder import build_dag

pytestmark = pytest.mark.django_db


def texts(*contents):
    return lambda i: {"role": "user" if i % 2 == 0 else "assistant", "content": contents[i]}


def say(conversation, *contents):
    return append_messages(conversation, len(contents), payload=texts(*contents))


def ids(results):
    return [r["id"] for r in results]


def test_full_text_finds_words_ranks_and_marks_them(user, conversation):
    first, second, _ = say(
        conversation,
        "the deploy failed because the cache key was stale",
        "we deployed again and the cache warmed up; the cache is fine now",
        "unrelated chatter about lunch",
    )
    results = grep_for_user(
        user=user, request=GrepRequest(query="cache", mode="full_text", sort="relevance")
    )
    assert ids(results) == [second.pk, first.pk]
    assert results[0]["score"] > results[1]["score"] > 0
    assert "«cache»" in results[0]["snippet"]
    assert results[0]["type"] == "message" and results[0]["seq"] == 2
    assert results[0]["covered_by"] is None


def test_full_text_default_sort_is_newest_first(user, conversation):
    older, newer = say(conversation, "alpha release notes", "alpha again")
    results = grep_for_user(user=user, request=GrepRequest(query="alpha"))
    assert ids(results) == [newer.pk, older.pk]
    assert [r["score"] for r in results] == [None, None]  # scores come with sort=relevance


@pytest.mark.parametrize(
    "query",
    ['"unbalanced', "a -b OR (c", "NEAR(x y)", "col:umn", "*", "&|!<->", "^caret$", "'quote'"],
)
def test_full_text_syntax_characters_are_literal_and_never_an_error(user, conversation, query):
    say(conversation, "plain text about columns and carets")
    results = grep_for_user(user=user, request=GrepRequest(query=query, mode="full_text"))
    assert isinstance(results, list)


def test_full_text_minus_is_not_negation(user, conversation):
    (message,) = say(conversation, "the retry budget is exhausted")
    results = grep_for_user(user=user, request=GrepRequest(query="-retry budget"))
    assert ids(results) == [message.pk]


@pytest.mark.parametrize("mode", ["full_text", "regex"])
@pytest.mark.parametrize(
    "text,query",
    [
        ("我们决定把缓存过期时间改为九十秒，然后重新部署。", "过期时间"),
        ("我们决定把缓存过期时间改为九十秒，然后重新部署。", "缓存"),
        ("キャッシュの有効期限を九十秒に変更しました。", "有効期限"),
        ("キャッシュの有効期限を九十秒に変更しました。", "九十秒に変更"),
    ],
)
def test_cjk_text_is_findable_in_both_modes(user, conversation, mode, text, query):
    message, _ = say(conversation, text, "an English message in between")
    results = grep_for_user(user=user, request=GrepRequest(query=query, mode=mode))
    assert ids(results) == [message.pk]
    assert f"«{query}»" in results[0]["snippet"]


def test_regex_matches_and_marks_the_match(user, conversation):
    _, hit = say(conversation, "error code E100 seen", "error code E4242 seen twice")
    results = grep_for_user(user=user, request=GrepRequest(query=r"E42\d+", mode="regex"))
    assert ids(results) == [hit.pk]
    assert "«E4242»" in results[0]["snippet"]
    assert results[0]["score"] is None


def test_regex_is_case_sensitive_unless_asked(user, conversation):
    (message,) = say(conversation, "TimeoutError after 30s")
    assert grep_for_user(user=user, request=GrepRequest(query="timeouterror", mode="regex")) == []
    results = grep_for_user(
        user=user, request=GrepRequest(query="timeouterror", mode="regex", ignore_case=True)
    )
    assert ids(results) == [message.pk]


def test_an_invalid_regex_is_a_400_that_says_why(user, conversation):
    say(conversation, "anything")
    with pytest.raises(InvalidPattern) as caught:
        grep_for_user(user=user, request=GrepRequest(query="(unclosed", mode="regex"))
    assert caught.value.status == 400
    assert caught.value.code == "invalid_regex"
    assert "invalid regular expression" in caught.value.message


@override_settings(LCM_GREP_TIMEOUT_MS=100)
def test_a_pathological_regex_is_stopped_by_the_time_limit(user, conversation):
    # Exponential backtracking on both engines (seconds per row), with every literal of
    # the pattern present so no prefilter can rule the rows out.
    append_messages(
        conversation, 3, payload=lambda i: {"role": "user", "content": "ab" * 4000 + "c"}
    )
    with pytest.raises(SearchTimeout) as caught:
        grep_for_user(user=user, request=GrepRequest(query=r"^(([ab])*)*\2\1c$", mode="regex"))
    assert caught.value.status == 422
    assert caught.value.extra == {"timeout_ms": 100}
    # The connection is still usable and the time limit did not leak into later queries.
    assert len(grep_for_user(user=user, request=GrepRequest(query="abab", mode="regex"))) == 3


def test_regex_finds_a_match_older_than_ten_thousand_newer_rows(user, conversation):
    (old,) = say(conversation, "the one old needle-7731 message")
    append_messages(conversation, 10_050, start=1)
    results = grep_for_user(user=user, request=GrepRequest(query=r"needle-77\d\d", mode="regex"))
    assert ids(results) == [old.pk]
    no_literal = grep_for_user(
        user=user, request=GrepRequest(query=r"n[e]{2}dle-\d+", mode="regex")
    )
    assert ids(no_literal) == [old.pk]


def test_since_is_inclusive_and_before_exclusive(user, conversation):
    base = timezone.now().replace(microsecond=0) - dt.timedelta(days=3)
    messages = append_messages(
        conversation,
        3,
        payload=lambda i: {
            "role": "user",
            "content": f"marker {i}",
            "created_at": (base + dt.timedelta(days=i)).isoformat(),
        },
    )
    for mode, query in (("full_text", "marker"), ("regex", "marker")):
        results = grep_for_user(
            user=user,
            request=GrepRequest(
                query=query,
                mode=mode,
                since=base + dt.timedelta(days=1),
                before=base + dt.timedelta(days=2),
            ),
        )
        assert ids(results) == [messages[1].pk], mode


def test_limit_caps_the_hits_and_is_bounded(user, conversation):
    say(conversation, *[f"repeat word {i}" for i in range(7)])
    assert len(grep_for_user(user=user, request=GrepRequest(query="repeat", limit=5))) == 5
    with pytest.raises(InvalidInput):
        grep_for_user(user=user, request=GrepRequest(query="repeat", limit=201))


def test_grep_never_reads_another_users_conversations(user, other_user, make_conversation):
    mine = make_conversation()
    theirs = make_conversation(owner=other_user)
    (my_message,) = say(mine, "shared secret phrase")
    say(theirs, "shared secret phrase")
    assert ids(grep_for_user(user=user, request=GrepRequest(query="secret"))) == [my_message.pk]
    with pytest.raises(NotFound):
        grep_for_user(user=user, request=GrepRequest(query="secret", conversation_id=theirs.pk))


def test_staff_search_every_conversation(staff_user, user, other_user, make_conversation):
    say(make_conversation(owner=user), "visible to staff")
    say(make_conversation(owner=other_user), "visible to staff")
    assert len(grep_for_user(user=staff_user, request=GrepRequest(query="staff"))) == 2


def test_summary_hits_and_covered_by_of_compacted_messages(user, conversation):
    append_messages(conversation, 30)
    say_text = "the planted fact: the vault combination is 4-8-15"
    (planted,) = append_messages(
        conversation, 1, start=30, payload=lambda i: {"role": "user", "content": say_text}
    )
    append_messages(conversation, 20, start=31)
    dag = build_dag(
        conversation,
        leaf_size=10,
        fanout=4,
        max_depth=1,
        tail=8,
        leaf_text=lambda run: (
            "Leaf: discussed the vault combination"
            if any(m.pk == planted.pk for m in run)
            else "Leaf: routine test runs"
        ),
    )
    results = grep_for_user(user=user, request=GrepRequest(query="vault combination", scope="both"))
    by_type = {r["type"]: r for r in results}
    assert by_type["message"]["id"] == planted.pk
    assert by_type["message"]["covered_by"] == dag.top[0].id
    leaf = next(s for s in dag.leaves if "vault" in s.content)
    assert by_type["summary"]["id"] == leaf.id
    assert by_type["summary"]["depth"] == 0 and by_type["summary"]["kind"] == "leaf"
    only_summaries = grep_for_user(user=user, request=GrepRequest(query="vault", scope="summaries"))
    assert ids(only_summaries) == [leaf.id]


@override_settings(LCM_LARGE_FILE_TOKEN_THRESHOLD=100)
@pytest.mark.parametrize(
    "mode,query", [("full_text", "SCORE overflow"), ("regex", r"over\w+ at row 3\d\d")]
)
def test_files_scope_searches_stored_file_content(user, other_user, make_conversation, mode, query):
    rows = "\n".join(f"row {i}: ok" for i in range(400))
    body = f"{rows}\nscore overflow at row 377\n{rows}"
    mine = make_conversation()
    (message,) = append_messages(
        mine,
        1,
        payload=lambda i: {"role": "user", "content": f'<file name="run.log">{body}</file>'},
    )
    theirs = make_conversation(owner=other_user)
    append_messages(
        theirs,
        1,
        payload=lambda i: {"role": "user", "content": f'<file name="run.log">{body} x</file>'},
    )
    (file_id,) = message.file_ids
    assert "score overflow" not in message.content  # the text lives in the stored file only
    results = grep_for_user(user=user, request=GrepRequest(query=query, mode=mode, scope="files"))
    assert [(r["type"], r["id"], r["line"]) for r in results] == [("file", file_id, 401)]
    assert "overflow" in results[0]["snippet"] and "«" in results[0]["snippet"]


_SHORT_CJK_TEXTS = (
    "缓存",  # the whole content is the word
    "把缓存过期时间改为九十秒",  # inside a run
    "cache缓存layer",  # between Latin letters, no spaces
    "缓 存",  # the two characters apart: not the word
    "存缓",  # reversed: not the word
    "日本語のテキスト",  # another script run
    "an English message",
    "한국어 캐시 설정",  # hangul
)


@pytest.mark.parametrize("mode", ["full_text", "regex"])
@pytest.mark.parametrize("query", ["缓存", "缓", "存", "日本", "語", "캐시", "시", "a缓"])
def test_short_unspaced_words_find_exactly_the_messages_that_contain_them(
    user, conversation, mode, query
):
    # 1-2 characters have no trigram: on PostgreSQL the gram index narrows the rows,
    # and every row holding the word must still be found (compared with Python's `in`).
    messages = say(conversation, *_SHORT_CJK_TEXTS)
    expected = sorted(
        m.pk for m, text in zip(messages, _SHORT_CJK_TEXTS, strict=True) if query in text
    )
    results = grep_for_user(user=user, request=GrepRequest(query=query, mode=mode))
    assert sorted(ids(results)) == expected


@pytest.mark.postgres
def test_the_gram_column_is_filled_by_the_database_on_every_insert(conversation):
    from django.db import connection

    (message, plain) = say(conversation, "把缓存 abc 日", "no unspaced script here")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, content_cjk FROM conversations_message WHERE id IN (%s, %s)",
            [message.pk, plain.pk],
        )
        grams = dict(cursor.fetchall())
    assert sorted(grams[message.pk]) == sorted(["把", "缓", "存", "把缓", "缓存", "日"])
    assert grams[plain.pk] is None
