"""Sessions, branches, states, turns, provider steps and durable turn jobs (SRD 4-6, 16).

Rules the database enforces itself (tests in tests/turns/test_constraints.py): one state
per (branch, state_seq), one turn per (branch, turn_seq), one step per (turn, step_index),
checked enumerations (phase, strategy, tools mode, job state). Migration 0002 adds what
the ORM cannot say: triggers that refuse rewriting a turn's user message or a stored
final answer, any UPDATE of a state, and any DELETE of states, turns and steps.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from core.ids import new_id


class Phase(models.TextChoices):
    ACCEPTED = "accepted"
    CONTEXT_PREPARED = "context_prepared"
    RESPONDING = "responding"
    RESPONSE_FINALIZED = "response_finalized"
    STATE_COMMITTED = "state_committed"
    INDEXED = "indexed"
    DONE = "done"
    FAILED = "failed"


# The lifecycle order (SRD 6.1); `failed` is terminal and sorts last.
PHASE_ORDER: dict[str, int] = {phase: rank for rank, phase in enumerate(Phase.values)}
# A turn whose answer is durable (TX-A done); with no state_after it is "pending".
FINALIZED_PHASES = (
    Phase.RESPONSE_FINALIZED,
    Phase.STATE_COMMITTED,
    Phase.INDEXED,
    Phase.DONE,
)
# Phases that block the next turn on the branch (input gating, SRD 6.2).
OPEN_PHASES = (Phase.ACCEPTED, Phase.CONTEXT_PREPARED, Phase.RESPONDING)


class ContextStrategy(models.TextChoices):
    STATE = "state"
    LCM = "lcm"


class ToolsMode(models.TextChoices):
    DISABLED = "disabled"
    PARSE_ONLY = "parse_only"
    ENABLED = "enabled"


class StateReason(models.TextChoices):
    INITIAL = "initial"
    TURN = "turn"
    PIN = "pin"
    UNPIN = "unpin"
    FORK = "fork"
    ROLLBACK = "rollback"
    COMMIT = "commit"


class IndexStatus(models.TextChoices):
    PENDING = "pending"
    INDEXED = "indexed"
    DEGRADED = "degraded"


class JobType(models.TextChoices):
    SUMMARIZE_TURN = "summarize_turn"
    INDEX_TURN = "index_turn"
    RECONCILE = "reconcile"


class JobState(models.TextChoices):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


def _in(field: str, choices: type[models.TextChoices]) -> Q:
    return Q(**{f"{field}__in": choices.values})


class Session(models.Model):
    id = models.CharField(primary_key=True, max_length=26, default=new_id, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="turn_sessions"
    )
    title = models.TextField(blank=True, default="")
    active_branch = models.ForeignKey(
        "Branch", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    default_model = models.CharField(max_length=255, blank=True, default="")
    context_strategy = models.CharField(
        max_length=16, choices=ContextStrategy.choices, default=ContextStrategy.STATE
    )
    tools_mode = models.CharField(
        max_length=16, choices=ToolsMode.choices, default=ToolsMode.DISABLED
    )
    system_prompt = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=_in("context_strategy", ContextStrategy), name="session_strategy_valid"
            ),
            models.CheckConstraint(
                condition=_in("tools_mode", ToolsMode), name="session_tools_mode_valid"
            ),
        ]
        indexes = [models.Index(fields=["owner", "-created_at"], name="session_owner_recent")]

    def __str__(self) -> str:
        return self.title or self.id


class Branch(models.Model):
    id = models.CharField(primary_key=True, max_length=26, default=new_id, editable=False)
    session = models.ForeignKey(Session, on_delete=models.PROTECT, related_name="branches")
    # The LCM conversation that backs this branch: every turn message is mirrored there.
    conversation = models.OneToOneField(
        "conversations.Conversation", on_delete=models.PROTECT, related_name="turn_branch"
    )
    parent = models.ForeignKey(
        "self", on_delete=models.PROTECT, null=True, blank=True, related_name="children"
    )
    # Parent turns with turn_seq <= fork_turn_seq are this branch's ancestry.
    fork_turn_seq = models.BigIntegerField(null=True, blank=True)
    # The last message of the parent's conversation in the ancestry (its fork turn's).
    fork_message_seq = models.BigIntegerField(null=True, blank=True)
    base_state = models.ForeignKey(
        "StateCheckpoint", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    head_state = models.ForeignKey(
        "StateCheckpoint", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    head_seq = models.BigIntegerField(default=0)
    last_turn_seq = models.BigIntegerField(default=0)
    label = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(head_seq__gte=0), name="branch_head_seq_nonneg"),
            models.CheckConstraint(
                condition=Q(last_turn_seq__gte=0), name="branch_last_turn_seq_nonneg"
            ),
        ]

    def __str__(self) -> str:
        return self.label or self.id


class StateCheckpoint(models.Model):
    id = models.CharField(primary_key=True, max_length=26, default=new_id, editable=False)
    session = models.ForeignKey(Session, on_delete=models.PROTECT, related_name="states")
    branch = models.ForeignKey(
        Branch, on_delete=models.PROTECT, related_name="states", db_index=False
    )
    state_seq = models.BigIntegerField()
    parent = models.ForeignKey(
        "self", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    summary = models.TextField(blank=True, default="")
    # [{"id", "text", "created_at"}], always in the context verbatim.
    pinned_facts = models.JSONField(default=list, blank=True)
    token_count_est = models.PositiveIntegerField(default=0)
    schema_version = models.PositiveSmallIntegerField(default=1)
    reason = models.CharField(max_length=16, choices=StateReason.choices)
    source_turn = models.ForeignKey(
        "UserTurn", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    librarian = models.JSONField(default=dict, blank=True)  # validation, retries, fallback
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["branch", "state_seq"], name="state_branch_seq_unique"),
            models.CheckConstraint(condition=Q(state_seq__gte=0), name="state_seq_nonneg"),
            models.CheckConstraint(condition=_in("reason", StateReason), name="state_reason_valid"),
        ]

    def __str__(self) -> str:
        return f"state {self.state_seq} of {self.branch_id}"


class UserTurn(models.Model):
    id = models.CharField(primary_key=True, max_length=26, default=new_id, editable=False)
    session = models.ForeignKey(Session, on_delete=models.PROTECT, related_name="turns")
    branch = models.ForeignKey(
        Branch, on_delete=models.PROTECT, related_name="turns", db_index=False
    )
    turn_seq = models.BigIntegerField()
    state_before = models.ForeignKey(StateCheckpoint, on_delete=models.PROTECT, related_name="+")
    state_after = models.ForeignKey(
        StateCheckpoint, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    phase = models.CharField(max_length=24, choices=Phase.choices, default=Phase.ACCEPTED)
    user_message = models.JSONField()  # {"role", "blocks", "rendered_text"}; immutable
    final_assistant_message = models.JSONField(null=True, blank=True)  # immutable once set
    primary_provider = models.CharField(max_length=64)
    primary_model = models.CharField(max_length=255)
    tools_mode = models.CharField(
        max_length=16, choices=ToolsMode.choices, default=ToolsMode.DISABLED
    )
    context = models.JSONField(null=True, blank=True)  # the AssembledContext as sent
    telemetry = models.JSONField(default=dict, blank=True)
    index_status = models.CharField(
        max_length=16, choices=IndexStatus.choices, default=IndexStatus.PENDING
    )
    error = models.JSONField(null=True, blank=True)
    attached_chunks = models.JSONField(default=list, blank=True)
    # How much of the turn is in the branch's LCM conversation: "", "user" or "answer".
    mirrored = models.CharField(max_length=8, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["branch", "turn_seq"], name="turn_branch_seq_unique"),
            models.CheckConstraint(condition=Q(turn_seq__gte=1), name="turn_seq_positive"),
            models.CheckConstraint(condition=_in("phase", Phase), name="turn_phase_valid"),
            models.CheckConstraint(
                condition=_in("tools_mode", ToolsMode), name="turn_tools_mode_valid"
            ),
            models.CheckConstraint(
                condition=_in("index_status", IndexStatus), name="turn_index_status_valid"
            ),
        ]
        indexes = [models.Index(fields=["phase"], name="turn_phase_idx")]

    def __str__(self) -> str:
        return f"turn {self.turn_seq} of {self.branch_id}"

    @property
    def is_pending(self) -> bool:
        return self.phase in FINALIZED_PHASES and self.state_after_id is None


class ProviderStep(models.Model):
    id = models.CharField(primary_key=True, max_length=26, default=new_id, editable=False)
    turn = models.ForeignKey(
        UserTurn, on_delete=models.PROTECT, related_name="steps", db_index=False
    )
    step_index = models.PositiveIntegerField()
    provider = models.CharField(max_length=64)
    model_id = models.CharField(max_length=255)
    request_json = models.JSONField()  # exactly what was sent (no key, no headers)
    response_json = models.JSONField(null=True, blank=True)
    normalized_items = models.JSONField(default=list, blank=True)
    # {"status": completed|incomplete|paused|failed|cancelled|streaming, "reason", "code", "message"}
    outcome = models.JSONField(default=dict, blank=True)
    stream_path = models.TextField(null=True, blank=True)
    stream_displayed_bytes = models.BigIntegerField(default=0)
    stream_durable_bytes = models.BigIntegerField(default=0)
    usage = models.JSONField(default=dict, blank=True)
    started_at = models.DateTimeField(auto_now_add=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["turn", "step_index"], name="step_turn_index_unique"),
        ]

    def __str__(self) -> str:
        return f"step {self.step_index} of {self.turn_id}"


class TurnJob(models.Model):
    id = models.CharField(primary_key=True, max_length=26, default=new_id, editable=False)
    job_type = models.CharField(max_length=24, choices=JobType.choices)
    turn = models.ForeignKey(
        UserTurn, on_delete=models.PROTECT, null=True, blank=True, related_name="jobs"
    )
    branch = models.ForeignKey(
        Branch, on_delete=models.PROTECT, null=True, blank=True, related_name="jobs"
    )
    state = models.CharField(max_length=16, choices=JobState.choices, default=JobState.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True, default="")
    lease_until = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=_in("job_type", JobType), name="turnjob_type_valid"),
            models.CheckConstraint(condition=_in("state", JobState), name="turnjob_state_valid"),
            # At most one live job of a kind per turn: enqueueing twice is a no-op.
            models.UniqueConstraint(
                fields=["job_type", "turn"],
                condition=Q(state__in=["pending", "running"]),
                name="turnjob_one_live_per_turn",
            ),
        ]
        indexes = [models.Index(fields=["state", "job_type"], name="turnjob_state_type")]

    def __str__(self) -> str:
        return f"{self.job_type} {self.turn_id or self.branch_id} ({self.state})"
