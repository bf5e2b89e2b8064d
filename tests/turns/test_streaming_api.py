"""`POST /sessions/{id}/turns/` and `GET /turns/{id}/stream/`: Server-Sent Events with
resumable ids, the JSON answer, and the 4xx matrix (through the Django test client)."""

from __future__ import annotations

import pytest

from tests.conftest import token_client
from tests.factories import UserFactory
from tests.turns.live import parse_sse
from turns import runner, services
from turns.models import Phase, UserTurn


@pytest.fixture(autouse=True)
def _short_streams(settings):
    settings.LCM_OFFLINE_STREAM_CHUNKS = 5
    runner._shutting_down.clear()


@pytest.fixture
def owner(transactional_db):
    return UserFactory(username="owner")


@pytest.fixture
def client(owner):
    return token_client(owner)


@pytest.fixture
def session(owner):
    return services.session_create(owner=owner, title="chat", default_model="offline")


def _events(response) -> list:
    body = b"".join(response.streaming_content).decode()
    return list(parse_sse(body.split("\n")))


def _post(client, session, **body):
    return client.post(f"/api/v1/sessions/{session.id}/turns/", body, format="json")


def test_a_streamed_turn_sends_numbered_events_ending_with_done(client, session):
    response = _post(client, session, content="hello there", stream=True)
    assert response.status_code == 200
    assert response["Content-Type"] == "text/event-stream"
    assert response["Cache-Control"] == "no-cache"
    events = _events(response)
    assert [e.id for e in events] == list(range(1, len(events) + 1))
    names = [e.event for e in events]
    assert names[:3] == ["turn", "context", "step"]
    assert names[-1] == "done"
    assert "durable" in names
    turn = UserTurn.objects.get(pk=events[0].data["turn_id"])
    text = "".join(e.data["text"] for e in events if e.event == "delta")
    assert text == turn.final_assistant_message["rendered_text"] == events[-1].data["text"]
    assert turn.phase in (Phase.RESPONSE_FINALIZED, Phase.STATE_COMMITTED, Phase.DONE)


def test_accepting_text_event_stream_also_streams(client, session):
    response = client.post(
        f"/api/v1/sessions/{session.id}/turns/",
        {"content": "hi"},
        format="json",
        HTTP_ACCEPT="text/event-stream",
    )
    assert response.status_code == 200
    assert _events(response)[-1].event == "done"


def test_without_stream_the_finished_turn_comes_back_as_json(client, session):
    response = _post(client, session, content="hello json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["phase"] in ("response_finalized", "state_committed", "indexed", "done")
    assert body["final_assistant_message"]["rendered_text"].startswith("[offline provider]")


def test_the_stream_resumes_after_an_id_with_no_gap_and_no_duplicate(client, session):
    full = _events(_post(client, session, content="resume me", stream=True))
    turn_id = full[0].data["turn_id"]
    by_query = _events(client.get(f"/api/v1/turns/{turn_id}/stream/?after=4"))
    by_header = _events(client.get(f"/api/v1/turns/{turn_id}/stream/", HTTP_LAST_EVENT_ID="4"))
    expected = [(e.id, e.event, e.data) for e in full[4:]]
    assert [(e.id, e.event, e.data) for e in by_query] == expected
    assert [(e.id, e.event, e.data) for e in by_header] == expected
    everything = _events(client.get(f"/api/v1/turns/{turn_id}/stream/"))
    assert [e.id for e in everything] == [e.id for e in full]


@pytest.mark.parametrize("after", ["-1", "x", "1.5"])
def test_a_bad_resume_id_is_a_400(client, session, after):
    turn_id = _events(_post(client, session, content="hi", stream=True))[0].data["turn_id"]
    response = client.get(f"/api/v1/turns/{turn_id}/stream/?after={after}")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid"


def test_another_users_turn_stream_and_session_are_404(client, session):
    turn_id = _events(_post(client, session, content="mine", stream=True))[0].data["turn_id"]
    stranger = token_client(UserFactory(username="stranger"))
    assert stranger.get(f"/api/v1/turns/{turn_id}/stream/").status_code == 404
    response = stranger.post(
        f"/api/v1/sessions/{session.id}/turns/", {"content": "x"}, format="json"
    )
    assert response.status_code == 404
    assert UserTurn.objects.count() == 1


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"content": ""}, 400),
        ({"content": "   "}, 400),
        ({"content": "hi", "model": "no-such-model"}, 404),  # a model is a named resource
        ({"content": "hi", "model": "sonnet"}, 400),  # no ANTHROPIC_API_KEY here
        ({"content": "hi", "branch_id": "01NOSUCHBRANCH0000000000000"}, 404),
        ({"content": "hi", "tools_mode": "sometimes"}, 400),
        ({}, 400),
    ],
)
def test_bad_turns_are_refused_with_nothing_stored(client, session, monkeypatch, body, code):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    response = _post(client, session, stream=True, **body)
    assert response.status_code == code, response.content
    error = response.json()
    assert set(error) == {"code", "message", "extra"}
    assert UserTurn.objects.count() == 0


def test_an_unknown_model_lists_the_configured_ones(client, session):
    error = _post(client, session, content="hi", model="gpt-17").json()
    assert "offline" in str(error["extra"])


def test_a_missing_key_names_the_variable(client, session, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    error = _post(client, session, content="hi", model="sonnet").json()
    assert "ANTHROPIC_API_KEY" in error["message"] + str(error["extra"])
