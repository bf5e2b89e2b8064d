"""Receipts: one row per model call, a compressed manifest of what was sent (docs/receipts.md).

A receipt refers to stored items and never copies them: its `manifest` holds the items'
references (kind, id, version, tokens, a short content hash, why each is there), the
request's template (the body with item slots and blob references) and what came back.
The few figures the timeline charts are columns, so a list never opens a manifest.
`ReceiptBlob` keeps, once per conversation, the long literal parts of bodies that are no
stored item (a client's system prompt, tool definitions).
"""

from __future__ import annotations

from django.db import models

from conversations.models import Conversation


class CallSite(models.TextChoices):
    TURN = "turn"
    SUMMARY = "summary"
    LIBRARIAN = "librarian"
    EXPANSION = "expansion"
    DROPIN = "dropin"
    REPAIR = "repair"
    OTHER = "other"


class Receipt(models.Model):
    id = models.CharField(primary_key=True, max_length=26)  # a ULID: sorts by creation
    conversation = models.ForeignKey(
        Conversation,
        on_delete=models.CASCADE,
        related_name="receipts",
        null=True,
        blank=True,
        db_index=False,  # the (conversation, id) index serves it
    )
    created_at = models.DateTimeField()
    site = models.CharField(max_length=16, choices=CallSite.choices)
    wire = models.CharField(max_length=32)  # anthropic, openai, openai_chat, offline, ...
    model = models.CharField(max_length=255)
    # What the call belongs to, e.g. "step:<id>", "thread:<id>", "job:<id>".
    source = models.CharField(max_length=80, blank=True, default="")
    status = models.CharField(max_length=16)  # completed, incomplete, failed, ...
    input_tokens = models.IntegerField(null=True)
    output_tokens = models.IntegerField(null=True)
    cache_read_tokens = models.IntegerField(null=True)
    cache_write_tokens = models.IntegerField(null=True)
    cost_usd = models.FloatField(null=True)  # by the configured price table; None: no price
    latency_ms = models.FloatField(null=True)
    body_bytes = models.PositiveIntegerField()
    item_count = models.PositiveIntegerField()
    manifest = models.BinaryField()

    class Meta:
        indexes = [
            models.Index(fields=["conversation", "id"], name="receipt_conversation_idx"),
            models.Index(fields=["source"], name="receipt_source_idx"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(site__in=[c.value for c in CallSite]), name="receipt_site_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"receipt {self.id} ({self.site})"


class ReceiptBlob(models.Model):
    """A long literal stretch of request bodies, stored once per conversation by digest."""

    conversation = models.ForeignKey(
        Conversation,
        on_delete=models.CASCADE,
        related_name="receipt_blobs",
        null=True,
        blank=True,
        db_index=False,
    )
    digest = models.BinaryField(max_length=16)  # BLAKE2b-128 of the bytes
    data = models.BinaryField()  # zstd-compressed bytes
    size = models.PositiveIntegerField()  # bytes before compression

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["conversation", "digest"], name="receipt_blob_conversation_digest_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"blob {self.pk} ({self.size} bytes)"
