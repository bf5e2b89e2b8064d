"""Explorer pages through Django's test client: access, escaping, paging, query counts."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from conversations.models import Message
from explorer.middleware import POLICY
from explorer.selectors import CONTEXT_PAGE, TIMELINE_PAGE
from tests.explorer.helpers import XSS_TEXT, client_for, xss_payload
from tests.factories import append_messages


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/", "/conversations/1/", "/conversations/1/dag/", "/files/"])
def test_anonymous_visitors_are_sent_to_sign_in(path):
    response = Client().get(path)
    assert response.status_code == 302
    assert response["Location"] == f"/accounts/login/?next={path}"


def test_sign_in_page_renders_and_signs_in(user):
    client = Client()
    page = client.get("/accounts/login/")
    assert page.status_code == 200
    assert b'name="csrfmiddlewaretoken"' in page.content
    response = client.post(
        "/accounts/login/", {"username": "owner", "password": "pw-for-tests-123"}
    )
    assert response.status_code == 302
    assert response["Location"] == "/"
    assert client.get("/").status_code == 200


def test_wrong_password_stays_on_sign_in(user):
    response = Client().post("/accounts/login/", {"username": "owner", "password": "nope"})
    assert response.status_code == 200
    assert b"did not match" in response.content


def test_the_list_shows_only_the_users_own_conversations(user, other_user, make_conversation):
    mine = make_conversation(messages=3, session_id="mine-1", title="Cache bug")
    theirs = make_conversation(owner=other_user, session_id="theirs-1")
    body = client_for(user).get("/").content.decode()
    assert f'data-conversation="{mine.pk}"' in body
    assert f'data-conversation="{theirs.pk}"' not in body
    assert "Cache bug" in body


def test_staff_see_every_conversation(staff_user, user, other_user, make_conversation):
    a = make_conversation(session_id="a")
    b = make_conversation(owner=other_user, session_id="b")
    body = client_for(staff_user).get("/").content.decode()
    assert f'data-conversation="{a.pk}"' in body
    assert f'data-conversation="{b.pk}"' in body


def test_the_list_searches_session_id_and_title(user, make_conversation):
    by_session = make_conversation(session_id="deploy-42", title="x")
    by_title = make_conversation(session_id="s-2", title="The DEPLOY review")
    other = make_conversation(session_id="s-3", title="lunch")
    body = client_for(user).get("/", {"q": "deploy"}).content.decode()
    assert f'data-conversation="{by_session.pk}"' in body
    assert f'data-conversation="{by_title.pk}"' in body
    assert f'data-conversation="{other.pk}"' not in body


def test_the_list_shows_message_count_and_context_tokens(user, make_conversation):
    conversation = make_conversation(messages=4)
    tokens = sum(
        Message.objects.filter(conversation=conversation).values_list("token_count", flat=True)
    )
    body = client_for(user).get("/").content.decode()
    assert re.search(rf'<td class="num">4</td>\s*<td class="num">{tokens} / 128000</td>', body)


def test_conversation_page_access(user, other_user, staff_user, make_conversation):
    conversation = make_conversation(messages=2)
    url = f"/conversations/{conversation.pk}/"
    assert client_for(user).get(url).status_code == 200
    assert client_for(staff_user).get(url).status_code == 200
    assert client_for(other_user).get(url).status_code == 404
    assert client_for(other_user).get(f"{url}dag/").status_code == 404
    assert client_for(other_user).get(f"{url}context/").status_code == 404
    assert client_for(user).get("/conversations/999999/").status_code == 404


def test_pages_send_a_content_security_policy_without_inline_script(user, conversation):
    response = client_for(user).get(f"/conversations/{conversation.pk}/")
    assert response["Content-Security-Policy"] == POLICY
    assert "script-src 'self'" in POLICY and "unsafe-inline" not in POLICY
    assert re.search(rb"<script(?![^>]*\bsrc=)[^>]*>", response.content) is None


def test_the_login_page_and_admin_carry_the_policy(staff_user):
    assert Client().get("/accounts/login/")["Content-Security-Policy"] == POLICY
    assert client_for(staff_user).get("/admin/")["Content-Security-Policy"] == POLICY


def test_json_api_responses_do_not_need_the_policy(api, conversation):
    response = api.get(f"/api/v1/conversations/{conversation.pk}/")
    assert response.status_code == 200
    assert "Content-Security-Policy" not in response


def test_untrusted_text_is_escaped_everywhere(user, make_conversation):
    conversation = make_conversation(title=XSS_TEXT, session_id='"><img src=x onerror=alert(1)>')
    append_messages(conversation, 2, payload=xss_payload)
    client = client_for(user)
    for url in (
        "/",
        f"/conversations/{conversation.pk}/",
        f"/conversations/{conversation.pk}/context/",
    ):
        body = client.get(url).content.decode()
        assert "<script>window.__xss" not in body, url
        assert "<img src=x" not in body, url
        assert 'href="javascript:' not in body, url
    body = client.get(f"/conversations/{conversation.pk}/").content.decode()
    assert "&lt;script&gt;window.__xss=1&lt;/script&gt;" in body
    assert "javascript:alert(document.cookie)" in body  # shown as text, never as a link


def test_timeline_opens_on_the_newest_page_and_pages_by_seq(user, make_conversation):
    conversation = make_conversation(messages=TIMELINE_PAGE + 30)
    client = client_for(user)
    body = client.get(f"/conversations/{conversation.pk}/").content.decode()
    seqs = [int(s) for s in re.findall(r'<article [^>]*data-seq="(\d+)"', body)]
    assert seqs == list(range(31, TIMELINE_PAGE + 31))
    body = client.get(f"/conversations/{conversation.pk}/", {"from": 1}).content.decode()
    seqs = [int(s) for s in re.findall(r'<article [^>]*data-seq="(\d+)"', body)]
    assert seqs == list(range(1, TIMELINE_PAGE + 1))
    body = client.get(f"/conversations/{conversation.pk}/", {"seq": 20}).content.decode()
    seqs = [int(s) for s in re.findall(r'<article [^>]*data-seq="(\d+)"', body)]
    assert seqs[0] == 15
    assert 'id="m-20"' in body and "highlight" in body


def test_timeline_renders_parts_by_type(user, make_conversation):
    conversation = make_conversation(messages=3)
    body = client_for(user).get(f"/conversations/{conversation.pk}/").content.decode()
    assert (
        '<pre class="tool-input">{\n  &quot;command&quot;: &quot;pytest tests/test_cache.py -k case_1&quot;\n}</pre>'
        in body
    )
    assert (
        '<pre class="tool-output">FAILED tests/test_cache.py::case_2 - TimeoutError after 30s</pre>'
        in body
    )
    assert body.count('class="cover in-context"') == 3


def test_context_items_load_in_pages(user, make_conversation):
    conversation = make_conversation(messages=CONTEXT_PAGE + 30)
    client = client_for(user)
    body = client.get(f"/conversations/{conversation.pk}/").content.decode()
    assert len(re.findall(r'<li class="ctx message', body)) == CONTEXT_PAGE
    assert (
        f'data-url="/conversations/{conversation.pk}/context/?after={CONTEXT_PAGE}&amp;first=1"'
        in body
    )
    fragment = client.get(
        f"/conversations/{conversation.pk}/context/", {"after": CONTEXT_PAGE}
    ).content.decode()
    ordinals = [int(o) for o in re.findall(r'data-ordinal="(\d+)"', fragment)]
    assert ordinals == list(range(CONTEXT_PAGE + 1, CONTEXT_PAGE + 31))
    assert "load-more" not in fragment


def test_context_bar_adds_up_by_kind(user, make_conversation, settings):
    settings.LCM_FRESH_TAIL_COUNT = 2
    conversation = make_conversation(messages=5)
    t = list(
        Message.objects.filter(conversation=conversation)
        .order_by("seq")
        .values_list("token_count", flat=True)
    )
    body = client_for(user).get(f"/conversations/{conversation.pk}/").content.decode()
    assert f'<b data-seg="tail">{t[3] + t[4]}</b>' in body
    assert f'<b data-seg="older">{t[0] + t[1] + t[2]}</b>' in body
    assert '<b data-seg="summaries">0</b>' in body
    assert f'<b data-seg="total">{sum(t)}</b>' in body
    assert '<b data-seg="dropped">0</b>' in body
    # nothing dropped: all of it is the next call's stable prefix, until compaction
    room = int(conversation.token_budget * settings.LCM_CONTEXT_THRESHOLD) - sum(t)
    assert f'id="stable-prefix" data-stable="{sum(t)}" data-room="{room}"' in body
    assert f'<b data-seg="room">{room}</b>' in body


def test_context_bar_shows_what_the_assembler_drops(user, make_conversation, settings):
    settings.LCM_FRESH_TAIL_COUNT = 2
    conversation = make_conversation(messages=5)
    t = list(
        Message.objects.filter(conversation=conversation)
        .order_by("seq")
        .values_list("token_count", flat=True)
    )
    # The tail (#4, #5) always goes; #3 still fits, #2 does not, so #1 and #2 are dropped.
    conversation.token_budget = t[2] + t[3] + t[4] + t[1] - 1
    conversation.save(update_fields=["token_budget"])
    body = client_for(user).get(f"/conversations/{conversation.pk}/").content.decode()
    assert f'<b data-seg="tail">{t[3] + t[4]}</b>' in body
    assert f'<b data-seg="older">{t[2]}</b>' in body
    assert f'<b data-seg="dropped">{t[0] + t[1]}</b>' in body
    assert f'<b data-seg="total">{t[2] + t[3] + t[4]}</b>' in body
    dropped = re.findall(r'<li class="ctx message role-\w+ dropped" data-ordinal="(\d+)"', body)
    assert dropped == ["1", "2"]
    assert 'id="stable-prefix" data-stable="0"' in body
    assert "No stable prefix" in body


def test_conversation_page_query_count_does_not_grow_with_the_conversation(
    user, make_conversation, django_assert_num_queries
):
    client = client_for(user)
    small = make_conversation(messages=TIMELINE_PAGE + 5)
    client.get(f"/conversations/{small.pk}/")  # warm the session
    big = make_conversation(messages=3 * TIMELINE_PAGE)
    for conversation in (small, big):
        # session, user, conversation, its owner, covering (1 CTE), the assembler's
        # context items and included messages (2), context page (1), timeline messages +
        # parts (2), the chat branch it backs, for the link to the console (1), its agent
        # compactions (1)
        with django_assert_num_queries(12):
            assert client.get(f"/conversations/{conversation.pk}/").status_code == 200


@pytest.mark.parametrize(
    "path",
    [
        "/?page=99999999999999999999",
        "/?q=%00deploy",
        "/files/?page=9223372036854775807",
        "/conversations/{pk}/?from=99999999999999999999999",
        "/conversations/{pk}/?seq=-99999999999999999999999",
        "/conversations/{pk}/?from=abc",
        "/conversations/{pk}/context/?after=99999999999999999999",
        "/conversations/{pk}/context-panel/",
        "/conversations/{pk}/dag/?message=99999999999999999999",
        "/conversations/{pk}/dag/?summary=" + "x" * 500,
    ],
)
def test_odd_query_strings_never_break_a_page(user, conversation, path):
    append_messages(conversation, 3)
    response = client_for(user).get(path.format(pk=conversation.pk))
    assert response.status_code == 200


@pytest.mark.parametrize(
    "path",
    [
        "/conversations/99999999999999999999999/",
        "/conversations/{pk}/summaries/sum_nope/",
        "/conversations/{pk}/summaries/" + "s" * 400 + "/expand/",
        "/files/" + "f" * 400 + "/",
    ],
)
def test_ids_that_do_not_exist_are_404(user, conversation, path):
    assert client_for(user).get(path.format(pk=conversation.pk)).status_code == 404


@pytest.mark.parametrize("since", ["2026-13-45", "yesterday"])
def test_a_bad_date_in_a_search_is_a_clear_400(user, conversation, since):
    response = client_for(user).get(
        f"/conversations/{conversation.pk}/search/", {"q": "x", "since": since}
    )
    assert response.status_code == 400
    assert b"since must be a date (YYYY-MM-DD)" in response.content


def test_a_nul_in_a_search_is_a_clear_400(user, conversation):
    response = client_for(user).get(f"/conversations/{conversation.pk}/search/", {"q": "a\x00b"})
    assert response.status_code == 400
    assert b"must not contain NUL" in response.content


def test_the_list_query_count_does_not_grow_with_conversations(
    user, make_conversation, django_assert_num_queries
):
    client = client_for(user)
    make_conversation(messages=2)
    client.get("/")
    for _ in range(5):
        make_conversation(messages=2)
    # session, user, the page of conversations with context tokens and session facts, its
    # sub-agents, summaries by depth, the agents for the filter
    with django_assert_num_queries(6):
        assert client.get("/").status_code == 200


def test_search_marks_the_match_with_mark_and_escapes_everything_else(user, make_conversation):
    """The match is a <mark> element; payload text around it and inside it stays text,
    and « » written in the content itself are shown as ‹ › text."""
    conversation = make_conversation()
    content = f"ticket RA-2198-NS broke {XSS_TEXT} «<b>fake</b>» </mark><script>x</script>"
    append_messages(conversation, 1, payload=lambda i: {"role": "user", "content": content})
    client = client_for(user)
    url = f"/conversations/{conversation.pk}/search/"

    body = client.get(url, {"q": "RA-2198-NS", "mode": "full_text"}).content.decode()
    assert "<mark>RA-2198-NS</mark>" in body
    assert body.count("<mark>") == 1
    # The content's own guillemets come back as ‹ (PostgreSQL's headline drops the tags
    # inside them) and are never taken for markers.
    results = body.split('id="grep-results"')[1].split("</ol>")[0]
    assert "‹" in results
    assert "«" not in results and "»" not in results
    assert "<script>window.__xss" not in body
    assert "<img src=x" not in body
    assert "<b>fake</b>" not in body
    assert "</mark><script>x</script>" not in body

    # The match inside the payload: only the word is marked, the tags around it are text.
    body = client.get(url, {"q": "script", "mode": "regex"}).content.decode()
    assert "&lt;<mark>script</mark>&gt;window.__xss=1" in body
    assert "<script>window.__xss" not in body
