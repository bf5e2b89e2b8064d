"""Retention policies (docs/retention.md): the server default comes from settings
(LCM_RETENTION_*); a policy row for a user overrides it for their conversations, and one
for a conversation overrides both. A field left empty inherits from the level below.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from conversations.models import Conversation


class RetentionPolicy(models.Model):
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="retention_policy",
    )
    conversation = models.OneToOneField(
        Conversation,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="retention_policy",
    )
    # Archive raw content older than this many days (0: not by age; empty: inherit).
    archive_after_days = models.PositiveIntegerField(null=True, blank=True)
    # Archive raw content beyond the newest N tokens (0: not by size; empty: inherit).
    keep_newest_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    # Hard-delete a conversation idle this many days (0: never; empty: inherit). Runs only
    # through `lcm_retention apply --delete` or the scheduled job, audited per conversation.
    delete_after_days = models.PositiveIntegerField(null=True, blank=True)
    # The semantic memory of archived content (memory.archived_content_policy; empty:
    # inherit): its vectors kept as float32 or compressed, its memory full-text rows kept or
    # dropped, or dropped with the units' text moved to the archive (archive).
    archived_vectors = models.CharField(
        max_length=8, null=True, blank=True, choices=[(v, v) for v in ("keep", "float16", "int8")]
    )
    archived_fulltext = models.CharField(
        max_length=8,
        null=True,
        blank=True,
        choices=[(v, v) for v in ("keep", "drop", "archive")],
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "retention policies"
        constraints = [
            models.CheckConstraint(
                condition=Q(user__isnull=True, conversation__isnull=False)
                | Q(user__isnull=False, conversation__isnull=True),
                name="retention_policy_one_scope",
            ),
            models.CheckConstraint(
                condition=Q(archived_vectors__isnull=True)
                | Q(archived_vectors__in=("keep", "float16", "int8")),
                name="retention_policy_vectors_valid",
            ),
            models.CheckConstraint(
                condition=Q(archived_fulltext__isnull=True)
                | Q(archived_fulltext__in=("keep", "drop", "archive")),
                name="retention_policy_fulltext_valid",
            ),
        ]

    def __str__(self) -> str:
        if self.conversation_id:
            return f"conversation {self.conversation_id}"
        return f"user {self.user_id}"
