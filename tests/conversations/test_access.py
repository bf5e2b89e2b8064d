"""The access matrix on every foundation endpoint: anonymous 401, another user 404 (never
403, and indistinguishable from a missing id), owner and staff 2xx; token and session
authentication (with CSRF enforced for unsafe methods)."""

from __future__ import annotations

import pytest
from django.middleware.csrf import _get_new_csrf_string
from rest_framework.test import APIClient

from conversations.models import Conversation, Message
from conversations.selectors import conversation_get_for_user
from core.api.errors import NotFound
from tests.factories import UserFactory, append_messages

# (method, path under the conversation, body for unsafe methods, success status)
OBJECT_ENDPOINTS = [
    ("get", "", None, 200),
    ("get", "messages/", None, 200),
    ("post", "messages/", {"role": "user", "content": "hello"}, 201),
    ("post", "messages/", {"messages": [{"role": "user", "content": "hello"}]}, 201),
    ("get", "context-items/", None, 200),
]
IDS = ["detail", "messages list", "append one", "append batch", "context items"]


def _call(client, method, conversation_id, tail, body):
    url = f"/api/v1/conversations/{conversation_id}/{tail}"
    if method == "get":
        return client.get(url)
    return client.post(url, body, format="json")


@pytest.fixture
def owned(make_conversation):
    return make_conversation(messages=3)


@pytest.mark.parametrize(("method", "tail", "body", "ok"), OBJECT_ENDPOINTS, ids=IDS)
def test_anonymous_gets_401_on_every_conversation_endpoint(anon_api, owned, method, tail, body, ok):
    response = _call(anon_api, method, owned.pk, tail, body)
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"
    assert Message.objects.count() == 3


@pytest.mark.parametrize(("method", "tail", "body", "ok"), OBJECT_ENDPOINTS, ids=IDS)
def test_another_user_gets_the_same_404_as_for_a_missing_conversation(
    other_api, owned, method, tail, body, ok
):
    response = _call(other_api, method, owned.pk, tail, body)
    missing = _call(other_api, method, 987654, tail, body)
    assert response.status_code == missing.status_code == 404
    assert response.json() == {
        "code": "not_found",
        "message": f"conversation {owned.pk} not found",
        "extra": {},
    }
    assert missing.json()["message"] == "conversation 987654 not found"
    assert Message.objects.count() == 3


@pytest.mark.parametrize(("method", "tail", "body", "ok"), OBJECT_ENDPOINTS, ids=IDS)
def test_the_owner_gets_2xx_on_every_conversation_endpoint(api, owned, method, tail, body, ok):
    response = _call(api, method, owned.pk, tail, body)
    assert response.status_code == ok
    assert Message.objects.count() == (4 if method == "post" else 3)


@pytest.mark.parametrize(("method", "tail", "body", "ok"), OBJECT_ENDPOINTS, ids=IDS)
def test_staff_gets_2xx_on_another_users_conversation(staff_api, owned, method, tail, body, ok):
    response = _call(staff_api, method, owned.pk, tail, body)
    assert response.status_code == ok
    if tail == "":
        assert response.json()["owner"] == "owner"


def test_the_list_shows_only_the_callers_own_conversations(
    api, other_api, staff_api, anon_api, make_conversation, other_user
):
    mine = make_conversation(session_id="mine")
    theirs = make_conversation(owner=other_user, session_id="theirs")

    def ids(client, **params):
        response = client.get("/api/v1/conversations/", params)
        assert response.status_code == 200
        return sorted(c["id"] for c in response.json()["results"])

    assert ids(api) == [mine.pk]
    assert ids(other_api) == [theirs.pk]
    assert ids(other_api, session_id="mine") == []
    assert ids(staff_api) == sorted([mine.pk, theirs.pk])
    assert ids(staff_api, session_id="mine") == [mine.pk]
    assert anon_api.get("/api/v1/conversations/").status_code == 401


def test_anonymous_cannot_create_a_conversation(anon_api, db):
    response = anon_api.post("/api/v1/conversations/", {"session_id": "s"}, format="json")
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"
    assert Conversation.objects.count() == 0


def test_a_created_conversation_belongs_to_the_caller(other_api, other_user, api):
    response = other_api.post("/api/v1/conversations/", {"session_id": "s"}, format="json")
    assert response.status_code == 201
    assert Conversation.objects.get().owner_id == other_user.pk
    assert api.get(f"/api/v1/conversations/{response.json()['id']}/").status_code == 404


def test_an_inactive_users_token_is_refused(user, owned):
    client = APIClient()
    from tests.support.tokens import issue_token

    key = issue_token(user)
    user.is_active = False
    user.save(update_fields=["is_active"])
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    response = client.get(f"/api/v1/conversations/{owned.pk}/")
    assert response.status_code == 401
    assert response.json()["code"] == "authentication_failed"


# --- the checkpoint itself -------------------------------------------------------------


def test_the_checkpoint_lets_owner_and_staff_through_and_hides_from_others(
    owned, user, other_user, staff_user
):
    from django.contrib.auth.models import AnonymousUser

    assert conversation_get_for_user(user=user, conversation_id=owned.pk) == owned
    assert conversation_get_for_user(user=staff_user, conversation_id=owned.pk) == owned
    for outsider in (other_user, AnonymousUser()):
        with pytest.raises(NotFound):
            conversation_get_for_user(user=outsider, conversation_id=owned.pk)


# --- session authentication -------------------------------------------------------------


@pytest.fixture
def browser(user):
    """A logged-in browser session that must send a CSRF token with unsafe requests."""
    client = APIClient(enforce_csrf_checks=True)
    assert client.login(username="owner", password="pw-for-tests-123")
    return client


def test_a_logged_in_session_reads_its_conversations(browser, owned):
    assert browser.get(f"/api/v1/conversations/{owned.pk}/").status_code == 200
    messages = browser.get(f"/api/v1/conversations/{owned.pk}/messages/")
    assert [m["seq"] for m in messages.json()["results"]] == [1, 2, 3]


def test_a_session_post_without_a_csrf_token_is_refused(browser, owned):
    response = browser.post(
        f"/api/v1/conversations/{owned.pk}/messages/",
        {"role": "user", "content": "hi"},
        format="json",
    )
    assert response.status_code == 403
    body = response.json()
    assert body["code"] == "permission_denied"
    assert "CSRF" in body["message"]
    assert Message.objects.count() == 3


def test_a_session_post_with_a_csrf_token_appends(browser, owned):
    token = _get_new_csrf_string()
    browser.cookies["csrftoken"] = token
    response = browser.post(
        f"/api/v1/conversations/{owned.pk}/messages/",
        {"role": "user", "content": "hi"},
        format="json",
        HTTP_X_CSRFTOKEN=token,
    )
    assert response.status_code == 201
    assert response.json()["seq"] == 4


def test_a_session_of_another_user_gets_404(owned, db):
    UserFactory(username="mallory")
    client = APIClient(enforce_csrf_checks=True)
    assert client.login(username="mallory", password="pw-for-tests-123")
    assert client.get(f"/api/v1/conversations/{owned.pk}/").status_code == 404
    assert client.get("/api/v1/conversations/").json()["results"] == []


def test_a_token_client_needs_no_csrf_token(api, owned):
    client = APIClient(enforce_csrf_checks=True)
    client.credentials(**api._credentials)
    response = client.post(
        f"/api/v1/conversations/{owned.pk}/messages/",
        {"role": "user", "content": "hi"},
        format="json",
    )
    assert response.status_code == 201
    append_messages(owned, 1, start=10)
    assert Message.objects.filter(conversation=owned).count() == 5
