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
    PENDING = "pending"  # queued: a worker has not taken it yet
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
    dry_run = models.BooleanField(default=False)  # plan only: `plan` is the result
    # Same request, same job (security.redaction.submit): a keyed digest (HMAC with a key
    # derived from SECRET_KEY) of who asked, the scope and the selector; without the server's
    # key it confirms no guess of the selector's text.
    request_key = models.CharField(max_length=64, blank=True, default="", db_index=True)
    lease_until = models.DateTimeField(null=True, blank=True)  # a worker holds it until then

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(state__in=RedactionState.values), name="redaction_state_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.pk} ({self.state}) {self.scope_kind} {self.scope_id}"


class ExportState(models.TextChoices):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"  # the archive is stored until `expires_at`
    FAILED = "failed"
    EXPIRED = "expired"  # the archive was deleted (its time was up, or a redaction or hard
    # delete of what it holds removed it)


class ExportJob(models.Model):
    """An export archive built in the background (docs/security.md, "Export archives"):
    asked for by `POST /api/v1/exports/`, stored (encrypted at rest with LCM_ENCRYPTION_KEY)
    until `expires_at`, downloaded from `GET /api/v1/exports/{id}/archive/`."""

    id = models.CharField(primary_key=True, max_length=24)  # exp_ + 16 hex
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    actor_id = models.BigIntegerField(null=True, blank=True)
    actor_name = models.CharField(max_length=150, blank=True, default="")
    via = models.CharField(max_length=16)
    target_kind = models.CharField(max_length=16)  # conversation | session
    target_id = models.CharField(max_length=64)
    conversation_ids = models.JSONField(default=list, blank=True)
    state = models.CharField(
        max_length=16, choices=ExportState.choices, default=ExportState.PENDING
    )
    progress_done = models.PositiveIntegerField(default=0)  # archive entries written
    progress_total = models.PositiveIntegerField(null=True, blank=True)
    storage_key = models.CharField(max_length=255, blank=True, default="")
    size = models.BigIntegerField(null=True, blank=True)
    sha256 = models.CharField(max_length=64, blank=True, default="")
    manifest = models.JSONField(default=dict, blank=True)  # counts and digests, no content
    error = models.TextField(blank=True, default="")
    lease_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(state__in=ExportState.values), name="export_job_state_valid"
            ),
        ]
        indexes = [
            models.Index(fields=["actor_id", "target_kind", "target_id"], name="export_job_ask")
        ]

    def __str__(self) -> str:
        return f"{self.pk} ({self.state}) {self.target_kind} {self.target_id}"
