"""Scheduled integrity scans are leased jobs: a scan whose worker died is taken over by the
job reconciler, a live one is never run twice, and one that kills every worker ends."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from integrity.models import IntegrityJob, IntegrityReport
from integrity.tasks import integrity_job, run_integrity_job
from tests.factories import append_messages
from workers.reconcile import reconcile_jobs


def _orphan(conversation, *, attempts=1, lease_seconds=-40) -> IntegrityJob:
    """A running scan as a SIGKILLed worker leaves it: claimed, lease no longer renewed."""
    return IntegrityJob.objects.create(
        conversation=conversation,
        mode="scan",
        attempts=attempts,
        lease_until=timezone.now() + timedelta(seconds=lease_seconds),
    )


@pytest.mark.django_db
def test_a_scheduled_scan_is_a_job_row_with_its_report(conversation):
    append_messages(conversation, 5)
    result = integrity_job(conversation_id=conversation.pk, mode="scan")
    job = IntegrityJob.objects.get()
    assert (job.state, job.attempts, job.report_id) == ("succeeded", 1, result["report_id"])
    assert job.finished_at is not None
    assert IntegrityReport.objects.get(pk=job.report_id).trigger == "job"


@pytest.mark.django_db
def test_the_reconciler_reruns_a_scan_whose_worker_died(conversation, sync_queue):
    append_messages(conversation, 5)
    job = _orphan(conversation)
    counts = reconcile_jobs()
    assert (counts["integrity_redispatched"], counts["integrity_failed"]) == (1, 0)
    job.refresh_from_db()
    assert (job.state, job.attempts) == ("succeeded", 2)
    assert IntegrityReport.objects.filter(pk=job.report_id).exists()


@pytest.mark.django_db
def test_a_scan_under_a_live_lease_is_not_run_again(conversation, sync_queue):
    job = _orphan(conversation, lease_seconds=60)  # its worker is alive and renewing
    assert reconcile_jobs()["integrity_redispatched"] == 0
    assert "skipped" in run_integrity_job(job.pk)  # a duplicate dispatch does nothing
    job.refresh_from_db()
    assert (job.state, job.attempts, job.report_id) == ("running", 1, None)


@pytest.mark.django_db
def test_a_scan_that_stopped_its_worker_every_time_is_failed(conversation, sync_queue, settings):
    job = _orphan(conversation, attempts=settings.LCM_JOB_MAX_ATTEMPTS)
    counts = reconcile_jobs()
    assert (counts["integrity_failed"], counts["integrity_redispatched"]) == (1, 0)
    job.refresh_from_db()
    assert job.state == "failed" and "abandoned" in job.error
