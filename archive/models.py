"""Archive segments (docs/retention.md): one row per compressed, verified object in the
archive storage that holds a contiguous seq range of one conversation's message content.

A message's `archived_in` names its segment. The row is written in the same transaction
that clears the content from the database, after the object was written, synced, read
back and every hash verified, so an ACTIVE row always names a verified object.
"""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q

from conversations.models import Conversation


class SegmentState(models.TextChoices):
    ACTIVE = "active"  # holds the content of its messages
    RESTORED = "restored"  # its content is back in the database; the object may be gone
    MISSING = "missing"  # marked missing after a failed integrity check (audited)


class Segment(models.Model):
    conversation = models.ForeignKey(
        Conversation, on_delete=models.PROTECT, related_name="archive_segments"
    )
    seq_from = models.BigIntegerField()
    seq_to = models.BigIntegerField()
    message_count = models.PositiveIntegerField()
    key = models.CharField(max_length=255, unique=True)  # the object's name in the storage
    codec = models.CharField(max_length=8)  # zstd or gzip
    encrypted = models.BooleanField(default=False)
    stored_bytes = models.PositiveBigIntegerField()  # the object as stored
    raw_bytes = models.PositiveBigIntegerField()  # its JSON before compression
    sha256 = models.CharField(max_length=64)  # of the stored object
    # SHA-256 of each message's canonical form, 32 bytes each, in seq order.
    message_hashes = models.BinaryField()
    state = models.CharField(
        max_length=16, choices=SegmentState.choices, default=SegmentState.ACTIVE
    )
    created_at = models.DateTimeField(auto_now_add=True)
    restored_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(seq_from__gte=1, seq_to__gte=F("seq_from")),
                name="archive_segment_range_ordered",
            ),
            models.CheckConstraint(
                condition=Q(state__in=SegmentState.values), name="archive_segment_state_valid"
            ),
        ]
        indexes = [
            models.Index(fields=["conversation", "seq_from"], name="archive_segment_conv_seq")
        ]

    def __str__(self) -> str:
        return (
            f"segment {self.pk}: conversation {self.conversation_id} #{self.seq_from}-{self.seq_to}"
        )
