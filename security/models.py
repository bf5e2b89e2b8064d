"""The audit log: who did what destructive or administrative thing, and when.

Rows hold ids, counts and names of actions, never content (a hard delete's audit row must
not keep what it deleted). They are written by `security.services.audit_record` and are
read-only everywhere else (the admin cannot add, change or delete them).
"""

from __future__ import annotations

from django.db import models


class AuditAction(models.TextChoices):
    EXPORT = "export", "export"
    HARD_DELETE = "hard_delete", "hard delete"
    KEY_ROTATION = "key_rotation", "key rotation"
    INTEGRITY_REPAIR = "integrity_repair", "integrity repair"
    ADMIN_CHANGE = "admin_change", "admin change"
    ADMIN_LOGIN = "admin_login", "admin sign-in"
    LOGIN_THROTTLED = "login_throttled", "sign-in throttled"
    TOKEN_ISSUE = "token_issue", "API token issued"
    TOKEN_ROTATE = "token_rotate", "API token rotated"
    TOKEN_REVOKE = "token_revoke", "API token revoked"
    REDACTION = "redaction", "redaction"


class AuditEvent(models.Model):
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    action = models.CharField(max_length=32, choices=AuditAction.choices, db_index=True)
    # The actor is kept by id and name, not a foreign key: deleting a user keeps the trail.
    actor_id = models.BigIntegerField(null=True, blank=True)
    actor_name = models.CharField(max_length=150, blank=True, default="")
    via = models.CharField(max_length=16, help_text="api, command, admin or page")
    target_kind = models.CharField(max_length=32, blank=True, default="")
    target_id = models.CharField(max_length=64, blank=True, default="")
    ip = models.GenericIPAddressField(null=True, blank=True)
    # Counts and ids only, e.g. {"messages": 12, "files": 1}; never text a user wrote.
    details = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["target_kind", "target_id"])]

    def __str__(self) -> str:
        return (
            f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.action} {self.target_kind} {self.target_id}"
        )


class RedactionState(models.TextChoices):
    RUNNING = "running"  # steps left to do (a crash leaves it here: resume it)
    DONE = "done"  # every step done, verified; the sealed needles are cleared
    FAILED = "failed"  # a step raised; resume retries from that step


class Redaction(models.Model):
    """One redaction job (docs/security.md, "Redaction"): what it addresses, which steps
    are done (each recorded as it commits, so a crash resumes at the next one), the counts
    per place and the verification. Never the removed text: `sealed` holds it encrypted
    (security.redaction.sealing) while the job runs, for resume and verify, and is emptied
    when the job is done."""

    id = models.CharField(primary_key=True, max_length=24)  # red_ + 16 hex
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    actor_id = models.BigIntegerField(null=True, blank=True)
    actor_name = models.CharField(max_length=150, blank=True, default="")
    via = models.CharField(max_length=16)
    reason = models.CharField(max_length=40)
    scope_kind = models.CharField(max_length=16)  # conversation | session | user
    scope_id = models.CharField(max_length=64)
    selector_kind = models.CharField(max_length=16)  # messages | span | literal | regex
    selector = models.JSONField(default=dict, blank=True)  # ids, offsets, flags; no text
    sealed = models.TextField(blank=True, default="")
    conversation_ids = models.JSONField(default=list, blank=True)
    session_ids = models.JSONField(default=list, blank=True)
    message_ids = models.JSONField(default=list, blank=True)  # canonical rows it changed
    state = models.CharField(
        max_length=16, choices=RedactionState.choices, default=RedactionState.RUNNING
    )
    steps = models.JSONField(default=dict, blank=True)  # step -> {"at": ..., counts}
    plan = models.JSONField(default=dict, blank=True)  # the dry run's places and counts
    verification = models.JSONField(default=dict, blank=True)
    exports = models.JSONField(default=list, blank=True)  # exports on record before it
    error = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(state__in=RedactionState.values), name="redaction_state_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.pk} ({self.state}) {self.scope_kind} {self.scope_id}"
