"""Streaming through the real server (`lcm_serve`: uvicorn, ASGI) in a child process:
resuming after a dropped connection, recovery after SIGKILL mid-stream, clean SIGTERM."""

from __future__ import annotations

import random

import pytest

from tests.factories import UserFactory
from tests.support import suite
from tests.support.tokens import issue_token
from tests.turns.live import LiveServer, httpx, stream_events
from turns import services
from turns.models import Phase, StateCheckpoint, UserTurn

pytestmark = pytest.mark.process

ROUNDS = suite.count(ci=3, slow_count=10)  # kills in the SIGKILL test
SLOW = {"LCM_OFFLINE_STREAM_CHUNKS": "40", "LCM_OFFLINE_STREAM_DELAY_MS": "25"}


@pytest.fixture
def world(transactional_db):
    owner = UserFactory(username="owner")
    session = services.session_create(owner=owner, title="live", default_model="offline")
    token = issue_token(owner)
    return session, {"Authorization": f"Token {token}"}


def _send(client, server, session, headers, content):
    return stream_events(
        client,
        "POST",
        f"{server.url}/api/v1/sessions/{session.id}/turns/",
        json={"content": content, "stream": True},
        headers=headers,
    )


def test_a_dropped_connection_resumes_with_last_event_id_without_gap_or_duplicate(world):
    session, headers = world
    with LiveServer(**SLOW) as server, httpx.Client(timeout=30) as client:
        seen = []
        for _response, event in _send(client, server, session, headers, "tell me"):
            seen.append(event)
            if sum(e.event == "delta" for e in seen) == 5:
                break  # the client goes away mid-stream
        turn_id = seen[0].data["turn_id"]
        resumed = [
            event
            for _response, event in stream_events(
                client,
                "GET",
                f"{server.url}/api/v1/turns/{turn_id}/stream/",
                headers={**headers, "Last-Event-ID": str(seen[-1].id)},
            )
        ]
    events = seen + resumed
    assert [e.id for e in events] == list(range(1, len(events) + 1))
    assert events[-1].event == "done"
    turn = UserTurn.objects.get(pk=turn_id)
    text = "".join(e.data["text"] for e in events if e.event == "delta")
    assert text == turn.final_assistant_message["rendered_text"]


def _kill_mid_stream(client, server, session, headers, content, deltas_before_kill):
    received = []
    for _response, event in _send(client, server, session, headers, content):
        received.append(event)
        if sum(e.event == "delta" for e in received) >= deltas_before_kill:
            server.kill()
            break
    return received


def test_sigkill_mid_stream_recovers_partial_output_and_never_advances_the_head(world):
    """Kills at random points of a stream (ten with --slow), each followed by a restart."""
    session, headers = world
    rng = random.Random(20261123)
    server = LiveServer(**SLOW).start()
    try:
        with httpx.Client(timeout=30) as client:
            for round_ in range(ROUNDS):
                received = _kill_mid_stream(
                    client, server, session, headers, f"round {round_}", rng.randint(1, 35)
                )
                turn_id = received[0].data["turn_id"]
                shown = "".join(e.data["text"] for e in received if e.event == "delta")
                server = LiveServer(**SLOW).start()  # its start-up reconciler recovers
                rest = [
                    e
                    for _r, e in stream_events(
                        client,
                        "GET",
                        f"{server.url}/api/v1/turns/{turn_id}/stream/",
                        headers={**headers, "Last-Event-ID": str(received[-1].id)},
                    )
                ]
                assert rest, f"round {round_}: nothing after the restart"
                closing = rest[-1]
                assert closing.event == "error", closing
                assert closing.data.get("incomplete") is True
                recovered = closing.data["partial_text"]
                # Output reaches the journal before the client sees it: nothing shown
                # is lost (the journal may hold a little more than the client got).
                assert recovered.startswith(shown)
                turn = UserTurn.objects.get(pk=turn_id)
                assert turn.phase == Phase.FAILED
                assert turn.state_after_id is None
                assert turn.final_assistant_message["incomplete"] is True
            # The branch still works: one more turn, all the way through.
            events = [e for _r, e in _send(client, server, session, headers, "after the storm")]
            assert events[-1].event == "done"
    finally:
        server.kill()
    branch = session.active_branch
    branch.refresh_from_db()
    states = StateCheckpoint.objects.filter(branch=branch)
    seqs = sorted(states.values_list("state_seq", flat=True))
    assert seqs == list(range(len(seqs)))  # no duplicate, no gap
    assert branch.head_seq == seqs[-1]
    assert not StateCheckpoint.objects.filter(
        source_turn__phase=Phase.FAILED
    ).exists()  # no state from partial output
    assert (
        UserTurn.objects.filter(branch=branch)
        .exclude(phase__in=[Phase.FAILED, *services.FINALIZED_PHASES])
        .count()
        == 0
    )


def test_sigterm_stops_the_server_within_ten_seconds_with_streams_open(world):
    session, headers = world
    server = LiveServer(LCM_OFFLINE_STREAM_CHUNKS="400", LCM_OFFLINE_STREAM_DELAY_MS="50").start()
    with httpx.Client(timeout=30) as client:
        events = []
        for _response, event in _send(client, server, session, headers, "a long one"):
            events.append(event)
            if event.event == "delta":
                seconds = server.terminate(timeout=15)
                break
        remaining = []
        try:
            for _response, event in []:  # the connection is closed by the server
                remaining.append(event)
        except httpx.HTTPError:
            pass
    assert seconds < 10
    turn = UserTurn.objects.get(pk=events[0].data["turn_id"])
    assert turn.phase == Phase.FAILED
    assert turn.error["code"] == "server_shutdown"
    assert turn.final_assistant_message["incomplete"] is True
