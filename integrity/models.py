"""Integrity bookkeeping: scan reports, per-check results, and repair plans.

None of these rows is canonical history. A plan is a stored proposal; applying it is a
separate, explicit action whose who/when/what is recorded on the plan (the audit trail),
together with the report of the scan that ran after it.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from conversations.models import Conversation


class ScanMode(models.TextChoices):
    SCAN = "scan"
    SCAN_AND_PLAN = "scan_and_plan"


class Trigger(models.TextChoices):
    API = "api"
    COMMAND = "command"
    JOB = "job"
    REPAIR = "repair"  # the scan that runs after a plan is applied


class IntegrityReport(models.Model):
    # Null: a scan of every conversation.
    conversation = models.ForeignKey(
        Conversation, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    mode = models.CharField(max_length=16, choices=ScanMode.choices)
    trigger = models.CharField(max_length=16, choices=Trigger.choices)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    total_problems = models.PositiveIntegerField()
    checks = models.JSONField(default=list)  # [{name, count, examples}] in check order
    duration_ms = models.FloatField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [
            models.Index(fields=["conversation", "-created_at"], name="integrity_report_recent")
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(mode__in=ScanMode.values), name="integrity_report_mode_valid"
            ),
            models.CheckConstraint(
                condition=Q(trigger__in=Trigger.values), name="integrity_report_trigger_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"report {self.pk}: {self.total_problems} problem(s)"


class CheckResult(models.Model):
    """One check's count in one report: what lcm_integrity_failures_total adds up."""

    report = models.ForeignKey(IntegrityReport, on_delete=models.CASCADE, related_name="results")
    name = models.CharField(max_length=64)
    count = models.PositiveIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["report", "name"], name="check_result_unique")
        ]

    def __str__(self) -> str:
        return f"{self.name}: {self.count}"


class PlanStatus(models.TextChoices):
    PROPOSED = "proposed"
    APPLYING = "applying"
    APPLIED = "applied"
    FAILED = "failed"


class RepairPlan(models.Model):
    report = models.ForeignKey(IntegrityReport, on_delete=models.PROTECT, related_name="plans")
    conversation = models.ForeignKey(Conversation, on_delete=models.PROTECT, related_name="+")
    status = models.CharField(
        max_length=16, choices=PlanStatus.choices, default=PlanStatus.PROPOSED
    )
    # [{action, check, automatic, description, ...target}] — see integrity/plans.py.
    actions = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)
    # The audit trail of the apply.
    applied_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    applied_at = models.DateTimeField(null=True, blank=True)
    outcome = models.JSONField(null=True, blank=True)  # per action: done / skipped and why
    error = models.TextField(blank=True, default="")
    after_report = models.ForeignKey(
        IntegrityReport, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=PlanStatus.values), name="repair_plan_status_valid"
            ),
            # A scan proposes at most one plan per conversation.
            models.UniqueConstraint(
                fields=["report", "conversation"], name="repair_plan_one_per_report"
            ),
        ]

    def __str__(self) -> str:
        return f"plan {self.pk} ({self.status})"


class IntegrityJobState(models.TextChoices):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class IntegrityJob(models.Model):
    """One background integrity scan (the scheduled `integrity_job`), leased like the
    compaction and turn jobs: a worker that dies mid-scan stops renewing `lease_until`,
    and the job reconciler (workers/reconcile.py) hands the scan to a live worker."""

    conversation = models.ForeignKey(
        Conversation, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    mode = models.CharField(max_length=16, choices=ScanMode.choices)
    state = models.CharField(
        max_length=16, choices=IntegrityJobState.choices, default=IntegrityJobState.RUNNING
    )
    attempts = models.PositiveIntegerField(default=0)
    lease_until = models.DateTimeField(null=True, blank=True)
    report = models.ForeignKey(
        IntegrityReport, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["state", "lease_until"], name="integrity_job_lease")]

    def __str__(self) -> str:
        return f"integrity job {self.pk} ({self.state})"
