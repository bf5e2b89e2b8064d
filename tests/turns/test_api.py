"""The turn engine API (non-streaming endpoints): every route, the 4xx matrix with nothing
stored, and owner scoping (another user's object is a 404)."""

from __future__ import annotations

import pytest

from conversations.models import Conversation, Message
from tests.turns.conftest import send
from turns.models import Branch, Session, StateCheckpoint, UserTurn


def _counts() -> tuple:
    return (
        Session.objects.count(),
        Branch.objects.count(),
        StateCheckpoint.objects.count(),
        UserTurn.objects.count(),
        Conversation.objects.count(),
        Message.objects.count(),
    )


def test_create_list_and_read_a_session(api):
    created = api.post(
        "/api/v1/sessions/", {"title": "Research", "system_prompt": "Be brief."}, format="json"
    )
    assert created.status_code == 201
    body = created.json()
    assert body["title"] == "Research" and body["context_strategy"] == "state"
    [main] = body["branches"]
    assert main["label"] == "main" and main["head_seq"] == 0 and main["pending_count"] == 0
    assert body["active_branch_id"] == main["id"]
    assert (body["head_seq"], body["head_state_id"], body["pending_count"]) == (
        0,
        main["head_state_id"],
        0,
    )
    listed = api.get("/api/v1/sessions/").json()
    assert [s["id"] for s in listed["results"]] == [body["id"]]
    assert api.get(f"/api/v1/sessions/{body['id']}/").json()["branches"][0]["id"] == main["id"]


def test_the_session_detail_counts_pending_turns(api, user):
    from turns.services import session_create

    chat = session_create(owner=user)
    send(chat, "one", commit=True)
    send(chat, "two")
    body = api.get(f"/api/v1/sessions/{chat.pk}/").json()
    assert (body["head_seq"], body["pending_count"]) == (1, 1)


def test_history_turn_context_and_step(api, user):
    from turns.services import session_create

    chat = session_create(owner=user)
    first = send(chat, "hello there", commit=True)
    second = send(chat, "and again")
    history = api.get(f"/api/v1/sessions/{chat.pk}/turns/").json()["results"]
    assert [t["turn_seq"] for t in history] == [1, 2]
    assert [t["pending"] for t in history] == [False, True]
    assert history[0]["state_after"]["state_seq"] == 1
    assert history[1]["steps"][0]["outcome"]["status"] == "completed"
    detail = api.get(f"/api/v1/turns/{second.pk}/").json()
    assert detail["user_message"]["rendered_text"] == "and again"
    assert detail["state_before"] == {"id": first.state_after_id, "state_seq": 1}
    context = api.get(f"/api/v1/turns/{second.pk}/context/").json()
    assert context["context"]["user"]["rendered_text"] == "and again"
    sent = context["requests"][0]["messages"]
    assert sent[-1]["blocks"][-1]["text"] == "and again"
    # `state`: the first turn goes verbatim after the state it was folded from (none yet)
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[0]["blocks"][0]["text"] == "hello there"
    assert context["context"]["budget"]["state_fold_seq"] == 0
    step_id = detail["steps"][0]["id"]
    step = api.get(f"/api/v1/steps/{step_id}/").json()
    assert (
        step["turn_id"] == second.pk and step["normalized_items"][0]["kind"] == "assistant_message"
    )


def test_branch_state_pins_commit_fork_rollback_and_activate(api, user):
    from turns.services import session_create

    chat = session_create(owner=user)
    branch_id = chat.active_branch_id
    pinned = api.post(f"/api/v1/branches/{branch_id}/pins/", {"text": "Use UTC."}, format="json")
    assert pinned.status_code == 201
    pin = pinned.json()["pin"]
    assert pinned.json()["state"]["pinned_facts"] == [pin]
    first = send(chat, "first")
    committed = api.post(f"/api/v1/branches/{branch_id}/commit/").json()
    assert [c["state_seq"] for c in committed["committed"]] == [2]
    assert (committed["head_seq"], committed["pending_count"]) == (2, 0)
    state = api.get(f"/api/v1/branches/{branch_id}/state/").json()
    assert state["state_seq"] == 2 and state["pinned_facts"] == [pin]
    assert state["source_turn_id"] == first.pk
    unpinned = api.delete(f"/api/v1/branches/{branch_id}/pins/{pin['id']}/")
    assert unpinned.status_code == 200 and unpinned.json()["state"]["pinned_facts"] == []
    fork = api.post(f"/api/v1/branches/{branch_id}/fork/", {"turn_id": first.pk}, format="json")
    assert fork.status_code == 201
    assert (fork.json()["parent_id"], fork.json()["fork_turn_seq"]) == (branch_id, 1)
    assert api.get(f"/api/v1/branches/{fork.json()['id']}/").json()["head_seq"] == 2
    rolled = api.post(f"/api/v1/branches/{branch_id}/rollback/", {"state_seq": 1}, format="json")
    assert rolled.status_code == 201
    assert api.get(f"/api/v1/sessions/{chat.pk}/").json()["active_branch_id"] == rolled.json()["id"]
    back = api.post(
        f"/api/v1/sessions/{chat.pk}/activate-branch/", {"branch_id": branch_id}, format="json"
    )
    assert back.status_code == 200 and back.json()["active_branch_id"] == branch_id


def test_models_lists_the_configured_ones_with_availability(api, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-value-never-shown")
    body = api.get("/api/v1/models/").json()
    by_name = {m["name"]: m for m in body}
    assert by_name["offline"]["available"] is True
    assert by_name["sonnet"]["available"] is True and by_name["gpt"]["available"] is False
    assert "sk-ant-test-value-never-shown" not in str(body)
    assert by_name["sonnet"]["api_key_env"] == "ANTHROPIC_API_KEY"


# --- the 4xx matrix ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "status", "code"),
    [
        ({"content": ""}, 400, "invalid"),
        ({"content": "   "}, 400, "invalid"),
        ({"content": []}, 400, "invalid"),
        ({"content": [{"type": "bogus"}]}, 400, "invalid"),
        ({"content": "x" * 200_001}, 413, "payload_too_large"),
        # A model is a named resource (GET /models/): an unknown name is a 404.
        ({"content": "hi", "model": "nope"}, 404, "unknown_model"),
        ({"content": "hi", "model": "sonnet"}, 400, "missing_api_key"),
        ({"content": "hi", "branch_id": "01ZZZZZZZZZZZZZZZZZZZZZZZZ"}, 404, "not_found"),
    ],
)
def test_bad_turns_are_refused_and_nothing_is_stored(api, user, payload, status, code):
    from turns.services import session_create

    chat = session_create(owner=user)
    before = _counts()
    response = api.post(f"/api/v1/sessions/{chat.pk}/turns/", payload, format="json")
    assert response.status_code == status, response.json()
    assert response.json()["code"] == code
    assert _counts() == before
    if code == "unknown_model":
        assert "offline" in response.json()["extra"]["configured"]
    if code == "missing_api_key":
        assert response.json()["extra"]["variable"] == "ANTHROPIC_API_KEY"


def test_a_branch_of_another_session_is_a_404(api, user):
    from turns.services import session_create

    chat = session_create(owner=user)
    other = session_create(owner=user)
    before = _counts()
    response = api.post(
        f"/api/v1/sessions/{chat.pk}/turns/",
        {"content": "hi", "branch_id": other.active_branch_id},
        format="json",
    )
    assert response.status_code == 404
    assert _counts() == before


def test_a_second_turn_while_the_first_responds_is_a_409_with_a_retry_hint(api, user):
    from turns.services import session_create, turn_accept

    chat = session_create(owner=user)
    turn_accept(session=chat, branch=Branch.objects.get(pk=chat.active_branch_id), content="busy")
    before = _counts()
    response = api.post(f"/api/v1/sessions/{chat.pk}/turns/", {"content": "next"}, format="json")
    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "turn_in_progress" and body["extra"]["retry_after_ms"] == 1000
    assert response["Retry-After"] == "1"
    assert _counts() == before


def test_fork_at_an_uncommitted_turn_and_bad_rollbacks(api, user):
    from turns.services import session_create

    chat = session_create(owner=user)
    pending = send(chat, "pending")
    branch_id = chat.active_branch_id
    before = _counts()
    fork = api.post(f"/api/v1/branches/{branch_id}/fork/", {"turn_id": pending.pk}, format="json")
    assert (fork.status_code, fork.json()["code"]) == (409, "turn_not_committed")
    missing = api.post(f"/api/v1/branches/{branch_id}/rollback/", {"state_seq": 7}, format="json")
    assert missing.status_code == 404
    negative = api.post(f"/api/v1/branches/{branch_id}/rollback/", {"state_seq": -1}, format="json")
    assert negative.status_code == 400
    empty_pin = api.post(f"/api/v1/branches/{branch_id}/pins/", {"text": "  "}, format="json")
    assert empty_pin.status_code == 400
    no_pin = api.delete(f"/api/v1/branches/{branch_id}/pins/01ZZZZZZZZZZZZZZZZZZZZZZZZ/")
    assert no_pin.status_code == 404
    bad_strategy = api.post("/api/v1/sessions/", {"context_strategy": "magic"}, format="json")
    assert bad_strategy.status_code == 400
    assert _counts() == before


def test_another_users_objects_are_404_everywhere(api, other_api, user):
    from turns.services import session_create

    chat = session_create(owner=user)
    turn = send(chat, "private", commit=True)
    step_id = turn.steps.get().pk
    branch_id = chat.active_branch_id
    before = _counts()
    gets = [
        f"/api/v1/sessions/{chat.pk}/",
        f"/api/v1/sessions/{chat.pk}/turns/",
        f"/api/v1/turns/{turn.pk}/",
        f"/api/v1/turns/{turn.pk}/context/",
        f"/api/v1/steps/{step_id}/",
        f"/api/v1/branches/{branch_id}/",
        f"/api/v1/branches/{branch_id}/state/",
    ]
    for url in gets:
        response = other_api.get(url)
        assert response.status_code == 404, url
        assert response.json()["code"] == "not_found"
    posts = [
        (f"/api/v1/sessions/{chat.pk}/turns/", {"content": "hi"}),
        (f"/api/v1/branches/{branch_id}/fork/", {}),
        (f"/api/v1/branches/{branch_id}/rollback/", {"state_seq": 0}),
        (f"/api/v1/branches/{branch_id}/pins/", {"text": "mine now"}),
        (f"/api/v1/branches/{branch_id}/commit/", {}),
        (f"/api/v1/sessions/{chat.pk}/activate-branch/", {"branch_id": branch_id}),
    ]
    for url, payload in posts:
        assert other_api.post(url, payload, format="json").status_code == 404, url
    assert other_api.get("/api/v1/sessions/").json()["results"] == []
    assert _counts() == before


def test_anonymous_requests_are_refused(anon_api):
    assert anon_api.get("/api/v1/sessions/").status_code in (401, 403)
    assert anon_api.post("/api/v1/sessions/", {}, format="json").status_code in (401, 403)
