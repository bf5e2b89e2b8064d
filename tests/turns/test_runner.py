"""The runner: provider steps streamed into journals and the turn's event log, through the
real SDKs against local servers that speak each API's streaming protocol."""

from __future__ import annotations

import json
import threading
import time

import pytest

from providers.offline import split_evenly
from tests.factories import UserFactory
from tests.support.fake_messages_api import (
    FakeMessagesAPI,
    anthropic_error_stream,
    anthropic_stream,
    anthropic_text_stream,
    anthropic_tool_use_stream,
    authentication_error,
    rate_limited,
    text_block,
    tool_use_block,
)
from tests.support.fake_responses_api import FakeResponsesAPI, responses_text_stream
from turns import events, journal, runner, services
from turns.jobs import commit_pending
from turns.models import Phase, ProviderStep, UserTurn

CANARY = "sk-ant-api03-CANARY-9f8e7d6c5b4a-never-stored"


@pytest.fixture(autouse=True)
def _runner_accepting():
    runner._shutting_down.clear()
    yield
    runner._shutting_down.clear()


@pytest.fixture
def anthropic_api(monkeypatch):
    with FakeMessagesAPI() as api:
        monkeypatch.setenv("ANTHROPIC_API_KEY", CANARY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.base_url)
        yield api


@pytest.fixture
def session(transactional_db):
    return services.session_create(owner=UserFactory(username="owner"), title="chat")


def _turn(session, content="What is the ticket?", **kwargs) -> UserTurn:
    session.refresh_from_db()
    return services.turn_accept(
        session=session, branch=session.active_branch, content=content, **kwargs
    )


def _log(turn) -> list[events.TurnEvent]:
    return events.read_log(turn.id)


def _names(turn) -> list[str]:
    return [e.event for e in _log(turn)]


def test_an_offline_turn_streams_deltas_that_add_up_to_the_stored_answer(session, settings):
    settings.LCM_OFFLINE_STREAM_CHUNKS = 6
    turn = runner.run_turn(turn_id=_turn(session, model="offline").id)
    assert turn.phase == Phase.RESPONSE_FINALIZED
    log = _log(turn)
    assert [e.id for e in log] == list(range(1, len(log) + 1))
    names = [e.event for e in log]
    assert names[:3] == ["turn", "context", "step"]
    assert names[-1] == "done"
    streamed = "".join(e.data["text"] for e in log if e.event == "delta")
    assert names.count("delta") == len(split_evenly(streamed, 6)) > 1
    assert streamed == turn.final_assistant_message["rendered_text"]
    assert streamed.startswith("[offline provider]")
    step = ProviderStep.objects.get(turn=turn)
    size = len(streamed.encode())
    assert (step.stream_displayed_bytes, step.stream_durable_bytes) == (size, size)
    durable = [e.data for e in log if e.event == "durable"]
    assert durable[-1]["displayed"] == durable[-1]["durable"] == size
    entries = journal.read_entries(journal.journal_path(step.id))
    assert "".join(e["payload"]["text"] for e in entries if e["event_type"] == "lcm.text") == (
        streamed
    )
    assert entries[-1]["event_type"] == journal.CLOSE_EVENT


def test_an_anthropic_stream_is_journaled_event_by_event(session, anthropic_api):
    anthropic_api.enqueue(anthropic_text_stream("The ticket is RA-2198.", chunks=4))
    turn = runner.run_turn(turn_id=_turn(session, model="sonnet").id)
    assert turn.phase == Phase.RESPONSE_FINALIZED
    assert turn.final_assistant_message["rendered_text"] == "The ticket is RA-2198."
    body = anthropic_api.requests[0].body
    assert body["stream"] is True
    assert isinstance(body["system"], str | list)
    assert all(m["role"] in ("user", "assistant") for m in body["messages"])
    step = ProviderStep.objects.get(turn=turn)
    kinds = [e["event_type"] for e in journal.read_entries(journal.journal_path(step.id))]
    for wire in ("message_start", "content_block_start", "content_block_delta", "message_stop"):
        assert wire in kinds
    assert step.outcome["status"] == "completed"
    assert step.usage["output_tokens"] == 20


def test_an_unknown_event_type_is_ignored_and_the_turn_completes(session, anthropic_api):
    anthropic_api.enqueue(anthropic_text_stream("fine", unknown_event="content_block_future"))
    turn = runner.run_turn(turn_id=_turn(session, model="sonnet").id)
    assert turn.phase == Phase.RESPONSE_FINALIZED
    assert turn.final_assistant_message["rendered_text"] == "fine"


def test_a_rate_limit_before_the_first_byte_is_retried(session, anthropic_api, settings):
    anthropic_api.enqueue(rate_limited(retry_after=0), anthropic_text_stream("after retry"))
    turn = runner.run_turn(turn_id=_turn(session, model="sonnet").id)
    assert turn.final_assistant_message["rendered_text"] == "after retry"
    assert len(anthropic_api.requests) == 2


def test_an_auth_error_fails_the_turn_with_the_providers_code_and_no_key(session, anthropic_api):
    anthropic_api.enqueue(authentication_error())
    turn = runner.run_turn(turn_id=_turn(session, model="sonnet").id)
    assert turn.phase == Phase.FAILED
    assert turn.final_assistant_message is None
    last = _log(turn)[-1]
    assert last.event == "error"
    assert last.data["code"] == turn.error["code"]
    assert "auth" in last.data["code"]
    assert turn.branch.head_seq == 0


def test_an_error_mid_stream_fails_the_turn_keeping_the_partial_output(session, anthropic_api):
    anthropic_api.enqueue(anthropic_error_stream("overloaded_error", "Overloaded", text="Half an "))
    turn = runner.run_turn(turn_id=_turn(session, model="sonnet").id)
    assert turn.phase == Phase.FAILED
    assert turn.error["code"] == "overloaded_error"
    assert turn.final_assistant_message["incomplete"] is True
    assert turn.final_assistant_message["rendered_text"] == "Half an "
    last = _log(turn)[-1]
    assert (last.event, last.data["code"], last.data["partial_text"]) == (
        "error",
        "overloaded_error",
        "Half an ",
    )
    turn.branch.refresh_from_db()
    assert turn.branch.head_seq == 0  # never advanced from partial output


def test_a_dropped_connection_ends_the_turn_incomplete_with_what_arrived(session, anthropic_api):
    anthropic_api.enqueue(anthropic_text_stream("one two three four", chunks=4, drop_after=5))
    turn = runner.run_turn(turn_id=_turn(session, model="sonnet").id)
    assert turn.phase == Phase.FAILED
    step = ProviderStep.objects.get(turn=turn)
    assert step.outcome["status"] in ("incomplete", "failed")
    assert turn.final_assistant_message["incomplete"] is True
    assert "one two three four".startswith(turn.final_assistant_message["rendered_text"])
    assert _log(turn)[-1].event == "error"


def test_a_tool_call_in_disabled_mode_is_an_error_the_client_sees(session, anthropic_api):
    anthropic_api.enqueue(anthropic_tool_use_stream("lcm_grep", {"query": "x"}))
    turn = runner.run_turn(turn_id=_turn(session, model="sonnet", tools_mode="disabled").id)
    assert turn.phase == Phase.FAILED
    assert turn.error["code"] == "tool_call_in_disabled_mode"
    assert "tools" not in anthropic_api.requests[0].body
    assert _log(turn)[-1].data["code"] == "tool_call_in_disabled_mode"


def test_parse_only_captures_the_tool_call_and_stops(session, anthropic_api):
    anthropic_api.enqueue(
        anthropic_stream(
            [text_block("I would search."), tool_use_block("lcm_grep", {"query": "RA"}, id="t1")]
        )
    )
    turn = runner.run_turn(turn_id=_turn(session, model="sonnet", tools_mode="parse_only").id)
    assert turn.phase == Phase.RESPONSE_FINALIZED
    blocks = turn.final_assistant_message["blocks"]
    assert [b["type"] for b in blocks] == ["text", "tool_use"]
    assert blocks[1]["input"] == {"query": "RA"}
    assert len(anthropic_api.requests) == 1  # the loop did not continue
    assert "tool_call" in _names(turn)


def test_an_openai_responses_stream_runs_a_turn(session, monkeypatch):
    with FakeResponsesAPI() as api:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-proj-CANARY-openai-never-stored")
        monkeypatch.setenv("OPENAI_BASE_URL", api.base_url)
        api.enqueue(responses_text_stream("Answer from Responses.", chunks=3))
        turn = runner.run_turn(turn_id=_turn(session, model="gpt").id)
        body = api.requests[0].body
    assert turn.phase == Phase.RESPONSE_FINALIZED
    assert turn.final_assistant_message["rendered_text"] == "Answer from Responses."
    assert body["stream"] is True
    assert body["truncation"] == "disabled"
    assert isinstance(body["max_output_tokens"], int)


def test_shutdown_ends_a_running_stream_incomplete_and_keeps_the_head(session, anthropic_api):
    anthropic_api.enqueue(anthropic_text_stream("w " * 40, chunks=40, chunk_delay=0.05))
    turn = _turn(session, model="sonnet")
    thread = threading.Thread(target=runner.run_turn, kwargs={"turn_id": turn.id})
    thread.start()
    deadline = time.monotonic() + 10
    while "delta" not in _names(turn) and time.monotonic() < deadline:
        time.sleep(0.02)
    started = time.monotonic()
    assert runner.shutdown(timeout=5) == []
    assert time.monotonic() - started < 5
    thread.join(5)
    turn.refresh_from_db()
    assert turn.phase == Phase.FAILED
    assert turn.error["code"] == "server_shutdown"
    assert turn.final_assistant_message["incomplete"] is True
    assert turn.final_assistant_message["rendered_text"].startswith("w ")
    turn.branch.refresh_from_db()
    assert turn.branch.head_seq == 0


def test_a_new_turn_is_refused_during_shutdown(session):
    runner._shutting_down.set()
    turn = runner.run_turn(turn_id=_turn(session, model="offline").id)
    assert turn.phase == Phase.FAILED
    assert turn.error["code"] == "server_shutdown"


def test_the_key_is_in_no_journal_event_log_or_step_row(session, anthropic_api):
    anthropic_api.enqueue(anthropic_text_stream("ok"), authentication_error())
    runner.run_turn(turn_id=_turn(session, model="sonnet").id)
    commit_pending(branch=session.active_branch)
    runner.run_turn(turn_id=_turn(session, "again", model="sonnet").id)
    for path in journal.streams_dir().iterdir():
        assert CANARY not in path.read_text()
    for step in ProviderStep.objects.all():
        row = json.dumps(
            [step.request_json, step.response_json, step.normalized_items, step.outcome]
        )
        assert CANARY not in row
    for turn in UserTurn.objects.all():
        assert CANARY not in json.dumps([turn.error, turn.context, turn.telemetry])
