"""The large-file table: a file block or tool output too large for the context, stored
aside (bytes in the `large_files` storage) and referenced from the message by id."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from conversations.models import Conversation


class LargeFile(models.Model):
    """A file block too large for the context, stored aside and referenced by id."""

    id = models.CharField(primary_key=True, max_length=32)  # file_ + 16 hex
    conversation = models.ForeignKey(
        Conversation, on_delete=models.PROTECT, related_name="large_files"
    )
    file_name = models.TextField(blank=True, default="")
    mime_type = models.CharField(max_length=255, blank=True, default="")
    byte_size = models.PositiveBigIntegerField()
    line_count = models.PositiveBigIntegerField(default=0)
    token_count = models.PositiveBigIntegerField(default=0)
    sha256 = models.CharField(max_length=64)
    storage_key = models.TextField()
    exploration_summary = models.TextField(blank=True, default="")
    tool_name = models.CharField(
        max_length=255, blank=True, default=""
    )  # set for intercepted tool output
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        # The table keeps the name it had inside the conversations app (migrations
        # largefiles 0001 and conversations 0007 moved the model without touching data).
        db_table = "conversations_largefile"
        constraints = [
            models.UniqueConstraint(
                fields=["conversation", "sha256"], name="large_file_content_unique"
            ),
            models.CheckConstraint(
                condition=Q(id__startswith="file_"), name="large_file_id_prefixed"
            ),
        ]
        indexes = [
            models.Index(fields=["conversation", "created_at"], name="large_file_conv_created")
        ]

    def __str__(self) -> str:
        return self.id
