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
