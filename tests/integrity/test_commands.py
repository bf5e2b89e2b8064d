"""lcm_integrity and lcm_integrity_schedule, and the django-q2 job entry point."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django_q.models import Schedule

from conversations.models import ContextItem
from integrity.models import IntegrityReport, PlanStatus, RepairPlan
from integrity.tasks import integrity_job
from tests.factories import append_messages

pytestmark = pytest.mark.usefixtures("large_file_storage")


def run(*args) -> str:
    out = StringIO()
    call_command("lcm_integrity", *args, stdout=out)
    return out.getvalue()


def test_the_command_reports_and_changes_nothing(broken):
    conversation, message = broken
    out = run("--conversation", str(conversation.pk))
    assert f"(conversation {conversation.pk}): 1 problem(s)" in out
    assert "unreachable_message: 1" in out
    assert RepairPlan.objects.count() == 0
    assert not ContextItem.objects.filter(message=message).exists()


def test_plan_then_apply_repairs_and_says_what_remains(broken, staff_user):
    conversation, message = broken
    out = run("--plan", "--json")
    report = json.loads(out)
    assert report["total_problems"] == 1
    [plan] = report["plans"]
    assert not ContextItem.objects.filter(message=message).exists()
    out = run("--apply", str(plan["id"]), "--user", staff_user.username)
    assert "reinsert_context_item: done" in out
    assert "0 problem(s)" in out
    stored = RepairPlan.objects.get(pk=plan["id"])
    assert stored.status == PlanStatus.APPLIED
    assert stored.applied_by == staff_user
    assert ContextItem.objects.filter(message=message).count() == 1


def test_applying_an_unknown_plan_is_an_error(db):
    with pytest.raises(CommandError, match="repair plan 424242 not found"):
        run("--apply", "424242")


def test_the_schedule_command_creates_one_schedule_and_updates_it(db):
    call_command("lcm_integrity_schedule", stdout=StringIO())
    call_command(
        "lcm_integrity_schedule", "--mode", "scan_and_plan", "--minutes", "60", stdout=StringIO()
    )
    [schedule] = Schedule.objects.filter(name="lcm-integrity")
    assert schedule.func == "integrity.tasks.integrity_job"
    assert schedule.kwargs == "{'mode': 'scan_and_plan'}"
    assert (schedule.schedule_type, schedule.minutes) == (Schedule.MINUTES, 60)
    call_command("lcm_integrity_schedule", "--remove", stdout=StringIO())
    assert not Schedule.objects.filter(name="lcm-integrity").exists()


def test_the_job_scans_and_plans(broken):
    conversation, _ = broken
    result = integrity_job(mode="scan_and_plan")
    report = IntegrityReport.objects.get(pk=result["report_id"])
    assert result["total_problems"] == report.total_problems == 1
    assert report.trigger == "job"
    assert report.plans.get().conversation_id == conversation.pk


def test_the_job_refuses_an_unknown_mode(db):
    with pytest.raises(ValueError, match="mode must be one of scan, scan_and_plan"):
        integrity_job(mode="fix")
    assert IntegrityReport.objects.count() == 0


def test_fail_on_problems_sets_the_exit_status(broken, conversation):
    with pytest.raises(SystemExit) as exited:
        run("--fail-on-problems")
    assert exited.value.code == 1
    ContextItem.objects.filter(conversation=conversation).delete()  # now worse, still 1
    with pytest.raises(SystemExit):
        run("--conversation", str(conversation.pk), "--fail-on-problems")


def test_a_clean_store_exits_zero_with_fail_on_problems(conversation):
    append_messages(conversation, 5)
    out = run("--fail-on-problems")
    assert "0 problem(s)" in out


def test_the_scheduled_job_runs_through_django_q(broken):
    """Run the schedule's function and kwargs the way the cluster does (sync mode)."""
    import ast

    from django_q.tasks import async_task, result

    call_command("lcm_integrity_schedule", "--mode", "scan_and_plan", stdout=StringIO())
    schedule = Schedule.objects.get(name="lcm-integrity")
    task_id = async_task(schedule.func, **ast.literal_eval(schedule.kwargs), sync=True)
    outcome = result(task_id)
    report = IntegrityReport.objects.get(pk=outcome["report_id"])
    assert (report.trigger, report.mode, report.total_problems) == ("job", "scan_and_plan", 1)
