"""The admin shows the turn engine's rows read-only; `lcm_turn` runs one turn from a shell."""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.turns.conftest import send
from turns.jobs import index_turn
from turns.models import Phase, Session, UserTurn


@pytest.mark.parametrize(
    "model", ["session", "branch", "statecheckpoint", "userturn", "providerstep", "turnjob"]
)
def test_the_admin_lists_turn_rows_read_only(client, staff_user, chat, model):
    send(chat, "visible in the admin", commit=True)
    staff_user.is_superuser = True
    staff_user.save()
    client.force_login(staff_user)
    listing = client.get(f"/admin/turns/{model}/")
    assert listing.status_code == 200
    assert client.get(f"/admin/turns/{model}/add/").status_code == 403


def test_the_admin_shows_a_turn_without_letting_it_change(client, staff_user, chat):
    turn = send(chat, "look but do not touch")
    staff_user.is_superuser = True
    staff_user.save()
    client.force_login(staff_user)
    page = client.get(f"/admin/turns/userturn/{turn.pk}/change/")
    assert page.status_code == 200 and "look but do not touch" in page.content.decode()
    client.post(f"/admin/turns/userturn/{turn.pk}/change/", {"phase": "failed"})
    assert UserTurn.objects.get(pk=turn.pk).phase == Phase.RESPONSE_FINALIZED


def test_lcm_turn_runs_one_turn_and_prints_the_answer(user, capsys):
    call_command("lcm_turn", "--user", user.username, "--message", "Hello from a shell", "--commit")
    out = capsys.readouterr()
    assert "[offline provider]" in out.out and "Hello from a shell" in out.out
    session = Session.objects.get(owner=user)
    turn = UserTurn.objects.get(session=session)
    assert turn.phase == Phase.STATE_COMMITTED
    assert f"session {session.pk}" in out.err
    call_command("lcm_turn", "--user", user.username, "--session", session.pk, "--message", "again")
    assert UserTurn.objects.filter(session=session).count() == 2


def test_lcm_turn_refuses_bad_input_clearly(user):
    with pytest.raises(CommandError, match="no user named"):
        call_command("lcm_turn", "--user", "nobody", "--message", "hi")
    with pytest.raises(CommandError, match="unknown_model"):
        call_command("lcm_turn", "--user", user.username, "--message", "hi", "--model", "nope")
    with pytest.raises(CommandError, match="missing_api_key.*ANTHROPIC_API_KEY"):
        call_command("lcm_turn", "--user", user.username, "--message", "hi", "--model", "sonnet")
    assert not UserTurn.objects.exists() and not Session.objects.exists()


def test_metrics_and_the_reconcile_schedule(client, chat):
    from django_q.models import Schedule

    send(chat, "count me")
    body = client.get("/metrics").content.decode()
    assert 'lcm_turns{phase="response_finalized"} 1' in body
    assert "lcm_turns_pending 1" in body
    assert 'lcm_turn_jobs_backlog{job_type="summarize_turn"} 1' in body
    schedule = Schedule.objects.get(name="lcm-turns-reconcile")
    assert (schedule.func, schedule.minutes) == ("turns.tasks.run_reconcile", 1)


def _stage_counts(client) -> dict[str, int]:
    """How many latencies /metrics has recorded per turn stage (histograms are per
    process and outlive a test, so callers compare before and after)."""
    body = client.get("/metrics").content.decode()
    return {
        stage: int(float(found.group(1)))
        if (found := re.search(rf'lcm_turn_stage_latency_ms_count{{stage="{stage}"}} (\S+)', body))
        else 0
        for stage in ("assemble", "summarize", "index")
    }


def test_metrics_record_the_latency_of_each_turn_stage(client, chat):
    before = _stage_counts(client)
    turn = send(chat, "time me", commit=True)
    index_turn(turn_id=turn.pk)
    after = _stage_counts(client)
    assert {stage: after[stage] - before[stage] for stage in after} == {
        "assemble": 1,
        "summarize": 1,
        "index": 1,
    }
    assert "# TYPE lcm_turn_stage_latency_ms histogram" in client.get("/metrics").content.decode()
