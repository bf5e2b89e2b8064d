"""Compaction bookkeeping: runs, jobs, and the summarizer spend guard and circuit breaker.

None of these rows is canonical history (that lives in `conversations`); they record what
compaction did and coordinate workers. Their state lives in the database because several
worker processes share it.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from conversations.models import Conversation


class Reason(models.TextChoices):
    THRESHOLD = "threshold"
    MANUAL = "manual"
    MAINTENANCE = "maintenance"


class Mode(models.TextChoices):
    INCREMENTAL = "incremental"
    FULL = "full"
    UNTIL_UNDER = "until_under"


class RunStatus(models.TextChoices):
    RUNNING = "running"
    COMPACTED = "compacted"
    NOTHING_TO_DO = "nothing_to_do"
    FAILED = "failed"


class CompactionRun(models.Model):
    """One call of the engine on one conversation.

    At most one run per conversation is `running` at a time (a partial unique index): that
    row is the conversation's compaction lease, and a second run gets a retryable conflict.
    """

    conversation = models.ForeignKey(
        Conversation, on_delete=models.PROTECT, related_name="compaction_runs"
    )
    reason = models.CharField(max_length=16, choices=Reason.choices)
    mode = models.CharField(max_length=16, choices=Mode.choices)
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.RUNNING)
    target_tokens = models.PositiveIntegerField(null=True, blank=True)
    tokens_before = models.PositiveBigIntegerField(default=0)
    tokens_after = models.PositiveBigIntegerField(default=0)
    passes = models.PositiveIntegerField(default=0)
    summary_ids = models.JSONField(default=list, blank=True)
    # Escalation levels used, spend guard / circuit breaker fallbacks, and the like.
    notes = models.JSONField(default=dict, blank=True)
    detail = models.TextField(blank=True, default="")
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    # Renewed while the run is alive (core/leases.py); once past, the run is abandoned.
    lease_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["conversation"],
                condition=Q(status="running"),
                name="compaction_run_one_running",
            ),
            models.CheckConstraint(
                condition=Q(status__in=RunStatus.values), name="compaction_run_status_valid"
            ),
        ]
        indexes = [
            models.Index(fields=["conversation", "-started_at"], name="compaction_run_recent")
        ]

    def __str__(self) -> str:
        return f"run {self.pk} ({self.status})"


class JobState(models.TextChoices):
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class CompactionJob(models.Model):
    """A queued request to compact a conversation; at most one pending per conversation."""

    conversation = models.ForeignKey(
        Conversation, on_delete=models.PROTECT, related_name="compaction_jobs"
    )
    reason = models.CharField(max_length=16, choices=Reason.choices)
    mode = models.CharField(max_length=16, choices=Mode.choices)
    target_tokens = models.PositiveIntegerField(null=True, blank=True)
    state = models.CharField(max_length=16, choices=JobState.choices, default=JobState.PENDING)
    run = models.ForeignKey(
        CompactionRun, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    attempts = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Running: renewed by the owner; past it, another worker may claim the job.
    lease_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["conversation"],
                condition=Q(state="pending"),
                name="compaction_job_one_pending",
            ),
            models.CheckConstraint(
                condition=Q(state__in=JobState.values), name="compaction_job_state_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"job {self.pk} ({self.state})"


class SummarizerCall(models.Model):
    """One model call, for the per-conversation spend guard (a sliding window count)."""

    conversation = models.ForeignKey(Conversation, on_delete=models.PROTECT, related_name="+")
    provider = models.CharField(max_length=64)
    called_at = models.DateTimeField()

    class Meta:
        indexes = [
            models.Index(fields=["conversation", "called_at"], name="summarizer_call_window")
        ]

    def __str__(self) -> str:
        return f"{self.provider} call at {self.called_at:%Y-%m-%d %H:%M:%S}"


class CircuitBreaker(models.Model):
    """Consecutive provider failures, shared by every worker process."""

    provider = models.CharField(max_length=64, unique=True)
    consecutive_failures = models.PositiveIntegerField(default=0)
    opened_until = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.provider}: {self.consecutive_failures} failure(s)"


class SummaryFidelity(models.Model):
    """What a summary keeps of its sources' handles (docs/compaction.md, "Fidelity").

    Written with the summary, in the apply's transaction. `handles` are the sources' handles
    (kind -> handle -> times seen; a condensed summary's are its children's), so a parent
    is measured against the whole span below it; `kept` is kind -> [named, total] and
    `dropped` kind -> the handles the text does not name. `path` is how the text was made:
    `deterministic`, `model`, `model_retried` (the gate asked again, naming what was
    missing), `model_appended` (the gate appended the missing handles), `fallback`, `agent`
    (an agent's own compaction, measured on import).
    """

    summary = models.OneToOneField(
        "conversations.Summary", primary_key=True, on_delete=models.CASCADE, related_name="fidelity"
    )
    score = models.FloatField(null=True, blank=True)  # None when the sources had no handles
    handle_count = models.PositiveIntegerField(default=0)
    kept = models.JSONField(default=dict, blank=True)
    dropped = models.JSONField(default=dict, blank=True)
    handles = models.JSONField(default=dict, blank=True)
    path = models.CharField(max_length=32, blank=True, default="")
    measure_ms = models.FloatField(default=0)  # drawing the handles and measuring the text
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "summary fidelities"

    def __str__(self) -> str:
        return f"{self.summary_id}: {self.score}"
