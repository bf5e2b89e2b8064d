"""The reconciler (SRD 6.4, 6.5): partial streams recovered from journals, stuck turns
failed cleanly, expired leases taken over, nothing committed twice."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from tests.turns.conftest import send
from turns import services
from turns.context import context_prepare
from turns.journal import OPEN_EVENT
from turns.models import (
    Branch,
    JobState,
    JobType,
    Phase,
    ProviderStep,
    StateCheckpoint,
    TurnJob,
    UserTurn,
)
from turns.reconcile import reconcile


def _dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def _journal(step: ProviderStep, pid: int, texts: list[str]) -> None:
    path = Path(step.stream_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        {
            "ts": time.time(),
            "provider": "offline",
            "event_type": OPEN_EVENT,
            "seq": 0,
            "payload": {"host": socket.gethostname(), "pid": pid, "step_id": step.pk},
        }
    ]
    for i, text in enumerate(texts, start=1):
        lines.append(
            {
                "ts": time.time(),
                "provider": "offline",
                "event_type": "lcm.text",
                "seq": i,
                "payload": {"index": 0, "text": text},
            }
        )
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def _responding_turn(chat, text="tell me a story") -> tuple[UserTurn, ProviderStep]:
    branch = Branch.objects.get(pk=chat.active_branch_id)
    turn = services.turn_accept(session=chat, branch=branch, content=text)
    context_prepare(turn=turn)
    step = services.step_start(
        turn=turn, request_json={"messages": []}, provider="offline", model_id="offline"
    )
    return turn, step


def test_a_step_whose_writer_died_is_finalized_incomplete_and_the_turn_failed(chat):
    turn, step = _responding_turn(chat)
    _journal(step, _dead_pid(), ["Once upon ", "a time"])
    counts = reconcile()
    assert counts["steps_recovered"] == 1
    step.refresh_from_db()
    turn.refresh_from_db()
    assert step.outcome["status"] == "incomplete" and step.ended_at is not None
    assert turn.phase == Phase.FAILED and turn.error["code"] == "stream_interrupted"
    assert turn.final_assistant_message["rendered_text"] == "Once upon a time"
    assert turn.final_assistant_message["incomplete"] is True
    branch = Branch.objects.get(pk=turn.branch_id)
    assert branch.head_seq == 0  # the head never advances from partial output
    assert reconcile()["steps_recovered"] == 0
    # the next turn works
    nxt = send(chat, "next please", commit=True)
    assert nxt.phase == Phase.STATE_COMMITTED and nxt.state_after.state_seq == 1


def test_a_step_without_output_is_finalized_failed(chat):
    turn, step = _responding_turn(chat)
    _journal(step, _dead_pid(), [])
    reconcile()
    step.refresh_from_db()
    turn.refresh_from_db()
    assert step.outcome["status"] == "failed"
    assert turn.phase == Phase.FAILED and turn.final_assistant_message is None


def test_a_step_whose_writer_is_alive_is_left_alone(chat):
    turn, step = _responding_turn(chat)
    live = subprocess.Popen(["sleep", "30"])
    try:
        _journal(step, live.pid, ["still going"])
        assert reconcile()["steps_recovered"] == 0
        assert UserTurn.objects.get(pk=turn.pk).phase == Phase.RESPONDING
    finally:
        live.kill()
        live.wait()
    assert reconcile()["steps_recovered"] == 1


def test_a_turn_stuck_before_its_stream_is_failed_after_a_minute(chat):
    branch = Branch.objects.get(pk=chat.active_branch_id)
    turn = services.turn_accept(session=chat, branch=branch, content="lost")
    assert reconcile()["turns_failed"] == 0  # young: its process may still be working
    counts = reconcile(now=timezone.now() + timedelta(seconds=61))
    assert counts["turns_failed"] == 1
    turn.refresh_from_db()
    assert turn.phase == Phase.FAILED and turn.error["code"] == "interrupted"


def test_an_expired_lease_is_taken_over_and_commits_once(
    chat, settings, django_capture_on_commit_callbacks
):
    turn = send(chat, "commit me once")
    job = TurnJob.objects.get(turn=turn, job_type=JobType.SUMMARIZE_TURN)
    # a worker claimed it and died
    TurnJob.objects.filter(pk=job.pk).update(
        state=JobState.RUNNING, attempts=1, lease_until=timezone.now() - timedelta(seconds=1)
    )
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "sync": True}
    with django_capture_on_commit_callbacks(execute=True):
        counts = reconcile()
    assert counts["leases_reclaimed"] == 1
    job.refresh_from_db()
    assert (job.state, job.attempts) == (JobState.DONE, 2)
    turn.refresh_from_db()
    assert turn.phase == Phase.DONE
    assert StateCheckpoint.objects.filter(source_turn=turn).count() == 1


def test_a_live_lease_is_not_taken_over(chat, settings):
    turn = send(chat, "mine")
    job = TurnJob.objects.get(turn=turn, job_type=JobType.SUMMARIZE_TURN)
    TurnJob.objects.filter(pk=job.pk).update(
        state=JobState.RUNNING, lease_until=timezone.now() + timedelta(seconds=30)
    )
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "sync": True}
    assert reconcile()["leases_reclaimed"] == 0
    assert TurnJob.objects.get(pk=job.pk).state == JobState.RUNNING


def test_the_reconciler_re_mirrors_a_turn_whose_mirror_never_ran(chat):
    from conversations.models import Message

    turn = send(chat, "mirror me")
    branch = Branch.objects.get(pk=chat.active_branch_id)
    UserTurn.objects.filter(pk=turn.pk).update(mirrored="user")
    assert reconcile()["mirrored"] == 1
    assert UserTurn.objects.get(pk=turn.pk).mirrored == "answer"
    assert Message.objects.filter(conversation_id=branch.conversation_id).count() == 2


@pytest.mark.parametrize("runs", [3])
def test_reconciling_many_times_never_duplicates_a_commit(
    chat, settings, runs, django_capture_on_commit_callbacks
):
    for i in range(3):
        send(chat, f"turn {i}")
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "sync": True}
    for _ in range(runs):
        with django_capture_on_commit_callbacks(execute=True):
            reconcile()
    branch = Branch.objects.get(pk=chat.active_branch_id)
    assert branch.head_seq == 3
    assert list(
        StateCheckpoint.objects.filter(branch=branch)
        .order_by("state_seq")
        .values_list("state_seq", flat=True)
    ) == [0, 1, 2, 3]
    assert set(UserTurn.objects.filter(branch=branch).values_list("phase", flat=True)) == {
        Phase.DONE
    }
