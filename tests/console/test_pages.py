"""Console pages through Django's test client: every page renders, owner scoping (another
user's session is a 404), escaping of untrusted text, CSRF, and the Content-Security-Policy."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from explorer.middleware import POLICY
from tests.console.helpers import XSS_TEXT, add_tool_step, client_for, make_session, send
from turns.branches import branch_fork, pin_add
from turns.models import Session, UserTurn

pytestmark = pytest.mark.django_db


def page_paths(session, turn) -> list[str]:
    base = f"/chat/{session.pk}/"
    return [
        base,
        base + "status/",
        base + "history/",
        base + "branches/",
        base + "pins/",
        base + "pending/",
        base + f"turns/{turn.pk}/",
        base + f"turns/{turn.pk}/context/",
    ]


@pytest.fixture
def chat(user):
    session = make_session(user, title="Release notes")
    turn = send(session, "What changed in the release?")
    return session, turn


def test_anonymous_visitors_are_sent_to_sign_in(chat):
    session, turn = chat
    for path in ["/chat/", *page_paths(session, turn)]:
        response = Client().get(path)
        assert response.status_code == 302, path
        assert response["Location"] == f"/accounts/login/?next={path}"


def test_every_page_renders_for_the_owner_with_the_strict_policy(user, chat):
    session, turn = chat
    client = client_for(user)
    for path in ["/chat/", *page_paths(session, turn)]:
        response = client.get(path)
        assert response.status_code == 200, path
        if response["Content-Type"].startswith("text/html"):
            assert response["Content-Security-Policy"] == POLICY
            body = response.content.decode()
            assert "<script>" not in body  # no inline script anywhere
            assert " style=" not in body


def test_another_users_session_is_a_404_on_every_page(other_user, chat):
    session, turn = chat
    client = client_for(other_user)
    for path in page_paths(session, turn):
        response = client.get(path)
        assert response.status_code == 404, path
        assert b"Release notes" not in response.content


def test_a_turn_of_another_session_is_a_404_even_inside_my_own(user, other_user, chat):
    _, turn = chat
    mine = make_session(other_user, title="mine")
    client = client_for(other_user)
    assert client.get(f"/chat/{mine.pk}/turns/{turn.pk}/").status_code == 404
    assert client.get(f"/chat/{mine.pk}/turns/{turn.pk}/context/").status_code == 404


def test_unknown_and_oversized_ids_are_404(user):
    client = client_for(user)
    assert client.get("/chat/01NOSUCHSESSION0000000000/").status_code == 404
    assert client.get("/chat/" + "x" * 300 + "/").status_code == 404


def test_the_list_shows_only_my_sessions(user, other_user):
    mine = make_session(user, title="Mine")
    theirs = make_session(other_user, title="Theirs")
    body = client_for(user).get("/chat/").content.decode()
    assert f'data-session="{mine.pk}"' in body
    assert f'data-session="{theirs.pk}"' not in body
    assert "Theirs" not in body


def test_the_empty_list_teaches_and_names_the_offline_provider(user, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    body = client_for(user).get("/chat/").content.decode()
    assert 'id="no-sessions"' in body
    assert 'id="offline-notice"' in body
    assert "ANTHROPIC_API_KEY" in body


def test_the_offline_notice_goes_away_with_a_key(user, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-real")
    body = client_for(user).get("/chat/").content.decode()
    assert 'id="offline-notice"' not in body


def test_creating_a_session_with_the_form(user):
    client = client_for(user)
    response = client.post(
        "/chat/",
        {
            "title": "Planning",
            "model": "offline",
            "context_strategy": "lcm",
            "tools_mode": "enabled",
        },
    )
    session = Session.objects.get(owner=user)
    assert response.status_code == 302
    assert response["Location"] == f"/chat/{session.pk}/"
    assert (session.title, session.default_model, session.context_strategy, session.tools_mode) == (
        "Planning",
        "offline",
        "lcm",
        "enabled",
    )
    assert session.active_branch is not None


def test_a_bad_form_is_a_400_and_stores_nothing(user):
    response = client_for(user).post(
        "/chat/",
        {"title": "x", "model": "no-such-model", "context_strategy": "state", "tools_mode": "nope"},
    )
    assert response.status_code == 400
    assert b"Select a valid choice" in response.content
    assert Session.objects.count() == 0


def test_the_form_needs_the_csrf_token(user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    response = client.post(
        "/chat/",
        {"title": "x", "model": "offline", "context_strategy": "state", "tools_mode": "disabled"},
    )
    assert response.status_code == 403
    assert Session.objects.count() == 0


def test_the_api_refuses_a_cookie_session_post_without_csrf(user):
    session = make_session(user)
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    response = client.post(
        f"/api/v1/sessions/{session.pk}/turns/",
        {"content": "hi"},
        content_type="application/json",
    )
    assert response.status_code == 403
    assert UserTurn.objects.count() == 0
    response = client.post(
        f"/api/v1/branches/{session.active_branch_id}/pins/",
        {"text": "x"},
        content_type="application/json",
    )
    assert response.status_code == 403


def test_the_chat_page_shows_the_header_the_turns_and_the_commands(user, chat):
    session, turn = chat
    body = client_for(user).get(f"/chat/{session.pk}/").content.decode()
    assert f'data-session="{session.pk}"' in body
    assert f'data-branch="{session.active_branch_id}"' in body
    assert '<b id="h-branch" data-branch="' in body
    assert '<span id="h-head-seq">' in body
    assert '<b id="h-pending">' in body
    assert f'<b id="h-phase">{turn.phase}</b>' in body
    assert f'data-turn="{turn.pk}"' in body
    assert "What changed in the release?" in body
    assert "[offline provider]" in body
    for command in [
        "history",
        "chunks",
        "branches",
        "pins",
        "retrieve",
        "pending",
        "commit",
        "help",
    ]:
        assert f'data-command="{command}"' in body
    assert f'data-fork="{turn.pk}"' not in body  # pending: no committed state to fork at
    assert f"/conversations/{session.active_branch.conversation_id}/" in body
    assert 'id="help"' in body


def test_status_json_reports_the_header_fields(user, chat):
    session, turn = chat
    branch = session.active_branch
    data = client_for(user).get(f"/chat/{session.pk}/status/").json()
    branch.refresh_from_db()
    pending = (
        UserTurn.objects.filter(branch=branch, state_after__isnull=True)
        .exclude(phase="failed")
        .count()
    )
    assert data == {
        "session_id": session.pk,
        "session_title": "Release notes",
        "branch_id": branch.pk,
        "branch_label": "main",
        "head_seq": branch.head_state.state_seq,
        "head_state_id": branch.head_state_id,
        "pending": pending,
        "phase": UserTurn.objects.get(pk=turn.pk).phase,
        "last_turn_id": turn.pk,
        "running_turn_id": None,
        "turn_phases": dict(
            UserTurn.objects.filter(branch=branch).order_by("-turn_seq").values_list("pk", "phase")
        ),
    }
    assert data["turn_phases"][turn.pk] == UserTurn.objects.get(pk=turn.pk).phase


def test_untrusted_text_is_escaped_everywhere(user):
    session = make_session(user, title=XSS_TEXT)
    turn = send(session, XSS_TEXT)
    add_tool_step(turn, name=XSS_TEXT, arguments={"q": XSS_TEXT}, output=XSS_TEXT)
    pin_add(branch=session.active_branch, text=XSS_TEXT)
    client = client_for(user)
    for path in ["/chat/", *page_paths(session, turn)]:
        response = client.get(path)
        if not response["Content-Type"].startswith("text/html"):
            continue  # JSON (the status) is read by console.js and shown with textContent
        body = response.content.decode()
        assert "<script>window.__xss" not in body, path
        assert "<img src=x onerror" not in body, path
        assert 'href="javascript:' not in body, path
    body = client.get(f"/chat/{session.pk}/pins/").content.decode()
    assert "&lt;script&gt;window.__xss=1&lt;/script&gt;" in body
    body = client.get(f"/chat/{session.pk}/history/").content.decode()
    assert '<code class="tool-name">&lt;script&gt;window.__xss=1&lt;/script&gt;' in body
    assert '<pre class="tool-output">&lt;script&gt;' in body


def test_history_lists_turns_with_their_steps(user, chat):
    session, turn = chat
    body = client_for(user).get(f"/chat/{session.pk}/history/").content.decode()
    step = turn.steps.get()
    assert f'data-turn="{turn.pk}"' in body
    assert f'data-step="{step.pk}"' in body
    assert "completed" in body


def test_a_fork_shows_its_own_turns_and_the_inherited_ones(user):
    session = make_session(user)
    first = send(session, "first on main", commit=True)
    second = send(session, "second on main", commit=True)
    fork = branch_fork(branch=session.active_branch, turn_id=first.pk)
    forked = send(session, "first on the fork", branch=fork)
    session.refresh_from_db()
    client = client_for(user)
    main_body = client.get(f"/chat/{session.pk}/").content.decode()
    assert f'data-turn="{second.pk}"' in main_body
    assert f'data-turn="{forked.pk}"' not in main_body
    from turns.branches import branch_activate

    branch_activate(session=session, branch_id=fork.pk)
    fork_body = client.get(f"/chat/{session.pk}/").content.decode()
    assert f'data-turn="{first.pk}"' in fork_body
    assert f'data-turn="{forked.pk}"' in fork_body
    assert f'data-turn="{second.pk}"' not in fork_body
    tree = client.get(f"/chat/{session.pk}/branches/").content.decode()
    assert tree.count('<li class="branch ') == 2
    assert f'data-activate="{first.branch_id}"' in tree  # main can be switched back to
    assert f'data-activate="{fork.pk}"' not in tree  # the fork is the active one


def test_what_the_model_saw_shows_every_section_and_the_pin(user):
    session = make_session(user)
    pin_add(branch=session.active_branch, text="The deploy window is Tuesday")
    turn = send(session, "When do we deploy?")
    turn.refresh_from_db()
    body = client_for(user).get(f"/chat/{session.pk}/turns/{turn.pk}/context/").content.decode()
    assert "The deploy window is Tuesday" in body
    assert "When do we deploy?" in body
    for section in ["system", "pinned", "user"]:
        tokens = turn.context["sections_tokens"][section]
        assert f'data-section="{section}" data-tokens="{tokens}"' in body
    assert f'<b id="total-tokens">{sum(turn.context["sections_tokens"].values())}</b>' in body
    assert 'id="shrink-steps"' in body
    assert 'id="latency"' in body
    assert 'id="usage"' in body


def test_a_state_session_shows_its_state_in_the_stable_prefix(user, settings):
    """The state strategy sends the state as of its fold before the turns since it, unchanged
    until the next fold (turns/state_fold.py): the page shows it where it is sent."""
    settings.LCM_STATE_FOLD_TOKENS = 0  # every turn folds: the second sends the first's state
    session = make_session(user, context_strategy="state")
    send(session, "The deploy window is Tuesday.", commit=True)
    turn = send(session, "When do we deploy?")
    turn.refresh_from_db()
    body = client_for(user).get(f"/chat/{session.pk}/turns/{turn.pk}/context/").content.decode()
    fold = turn.context["budget"]["state_fold_seq"]
    assert f"as of the fold after turn {fold};" in body
    state_at, prefix_end = body.index('class="ctx-state"'), body.index('id="stable-prefix-end"')
    assert body.index('id="stable-prefix"') < state_at < prefix_end
    assert "Tuesday" in body[state_at:prefix_end]
    tokens = turn.context["sections_tokens"]["state"]
    assert f'data-section="state" data-tokens="{tokens}" data-stable="true"' in body


def test_long_history_is_paginated(user):
    from console.selectors import TURNS_PAGE

    session = make_session(user)
    turns = [send(session, f"message {i}") for i in range(TURNS_PAGE + 3)]
    body = client_for(user).get(f"/chat/{session.pk}/").content.decode()
    assert len(re.findall(r'<article class="turn ', body)) == TURNS_PAGE
    assert f'data-turn="{turns[-1].pk}"' in body
    assert f'data-turn="{turns[0].pk}"' not in body
    older = client_for(user).get(f"/chat/{session.pk}/?before={turns[3].turn_seq}").content.decode()
    assert len(re.findall(r'<article class="turn ', older)) == 3
    assert f'data-turn="{turns[0].pk}"' in older


def test_the_explorer_and_the_chat_link_to_each_other(user, chat):
    session, _ = chat
    conversation_id = session.active_branch.conversation_id
    client = client_for(user)
    explorer = client.get(f"/conversations/{conversation_id}/").content.decode()
    assert (
        f'<a href="/chat/{session.pk}/" id="open-chat">open the chat (branch main)</a>' in explorer
    )
    body = client.get(f"/chat/{session.pk}/").content.decode()
    assert f'href="/conversations/{conversation_id}/" id="open-explorer"' in body
    assert 'id="nav-chat"' in body


def test_a_plain_conversation_has_no_chat_link(user, conversation):
    body = client_for(user).get(f"/conversations/{conversation.pk}/").content.decode()
    assert 'id="open-chat"' not in body


def test_chat_page_query_count_does_not_grow_with_the_turns(user, django_assert_num_queries):
    client = client_for(user)
    small = make_session(user, title="small")
    send(small, "one", commit=True)
    big = make_session(user, title="big")
    for i in range(12):
        send(big, f"turn {i}", commit=True)
    client.get(f"/chat/{small.pk}/")  # warm the session
    for session in (small, big):
        # session, user, chat session, branch, ancestry (1 CTE), turns + steps (2),
        # status: newest turn, pending count (2); the models config reads no database
        with django_assert_num_queries(9):
            assert client.get(f"/chat/{session.pk}/").status_code == 200
