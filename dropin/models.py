"""A drop-in thread: which ordinary conversation holds a history that a stateless client
resends, under which client key, and where it forked from.

The messages themselves are ordinary canonical messages of `conversation` (appended through
`conversations.services`); each carries the external id `dropin:<chain hash>`, the hash of
the system prompt and every message up to it, so the stored prefix of a request is found by
exact ids and a resent message is never stored twice. `head_hash` is the chain hash of the
last stored message (of the system prompt when none is), which finds the thread a request
continues in one indexed lookup.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from conversations.models import Conversation


class Thread(models.Model):
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="dropin_threads"
    )
    conversation = models.OneToOneField(
        Conversation, on_delete=models.PROTECT, related_name="dropin_thread"
    )
    # The client's X-LCM-Conversation key. One active thread holds a key; a fork takes the
    # key over and its parent keeps it, inactive, as history.
    key = models.CharField(max_length=200)
    active = models.BooleanField(default=True)
    system = models.TextField(blank=True, default="")
    model = models.CharField(max_length=255)
    head_hash = models.CharField(max_length=64)
    root_hash = models.CharField(max_length=64, blank=True, default="")  # its first message's
    message_count = models.PositiveIntegerField(default=0)
    parent = models.ForeignKey(
        "self", on_delete=models.PROTECT, null=True, blank=True, related_name="forks"
    )
    fork_position = models.PositiveIntegerField(default=0)  # messages shared with the parent
    # A passed-through request past the budget sends summaries, then the client's messages
    # from one of them on: {"first": that message's chain hash, "summaries": [...]}. Kept
    # while requests still fit with it, so the upstream's prefix only grows (cacheable) and
    # is rewritten only when it no longer fits (dropin/forward_context.py).
    forward_cut = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["key"], condition=Q(active=True), name="dropin_thread_active_key"
            ),
        ]
        indexes = [
            models.Index(fields=["owner", "head_hash"], name="dropin_thread_head"),
            models.Index(fields=["owner", "root_hash"], name="dropin_thread_root"),
        ]

    def __str__(self) -> str:
        return f"drop-in thread {self.key} (conversation {self.conversation_id})"


class StoredResponse(models.Model):
    """A Responses-wire answer given with `store` on (the API's default): what
    `GET /openai/v1/responses/{id}` returns, and the history `previous_response_id`
    continues (`input`: every item the answer followed, `previous_response_id` already
    resolved; the answer's own items are in `body["output"]`). Its messages are ordinary
    messages of `conversation`, as any drop-in request's."""

    id = models.CharField(primary_key=True, max_length=64)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="dropin_responses"
    )
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="dropin_responses"
    )
    input = models.JSONField()
    body = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["owner", "created_at"])]

    def __str__(self) -> str:
        return self.id
