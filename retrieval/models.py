"""Delegation grants: what a sub-agent expansion may read, for how long, and how much.

A grant is created when an expansion starts and revoked when it ends, whatever the
outcome; `expires_at` bounds it even if the revocation never happens (a crashed worker).
Token use is charged with a compare-and-set UPDATE, so concurrent tool calls on one grant
can never spend past its cap.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q


class GrantState(models.TextChoices):
    ACTIVE = "active"
    EXPIRED = "expired"
    REVOKED = "revoked"
    EXHAUSTED = "exhausted"


class DelegationGrant(models.Model):
    id = models.CharField(primary_key=True, max_length=32)  # grant_ + 16 hex
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="delegation_grants"
    )
    # The conversations the grantee may read; when `summary_ids` is not empty, only those
    # summaries and what lies below them.
    conversation_ids = models.JSONField(default=list)
    summary_ids = models.JSONField(default=list, blank=True)
    max_depth = models.PositiveSmallIntegerField()
    token_cap = models.PositiveIntegerField()
    tokens_used = models.PositiveIntegerField(default=0)
    prompt = models.TextField(blank=True, default="")
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoke_reason = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(tokens_used__lte=F("token_cap")), name="grant_tokens_within_cap"
            ),
            models.CheckConstraint(condition=Q(token_cap__gt=0), name="grant_cap_positive"),
            models.CheckConstraint(
                condition=Q(expires_at__gt=F("created_at")), name="grant_expires_after_creation"
            ),
            models.CheckConstraint(condition=Q(id__startswith="grant_"), name="grant_id_prefixed"),
        ]
        indexes = [
            models.Index(fields=["owner", "-created_at"], name="grant_owner_recent"),
            # The sweep reads only live grants.
            models.Index(
                fields=["expires_at"], condition=Q(revoked_at__isnull=True), name="grant_live"
            ),
        ]

    def __str__(self) -> str:
        return self.id

    def state(self, now) -> GrantState:
        if self.revoked_at is not None:
            return GrantState.REVOKED
        if self.expires_at <= now:
            return GrantState.EXPIRED
        if self.tokens_used >= self.token_cap:
            return GrantState.EXHAUSTED
        return GrantState.ACTIVE

    @property
    def tokens_remaining(self) -> int:
        return max(0, self.token_cap - self.tokens_used)
