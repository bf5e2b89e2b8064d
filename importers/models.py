"""Bookkeeping of imports: which conversation came from which source, what each imported
row was in its source (ids, token counts the source computed), files whose bytes were not
found, and the background import jobs of the API.

Canonical rows stay in `conversations`; these tables sit beside them (one row per imported
message, summary or file) so the source's own figures are kept without changing ours.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from conversations.models import Conversation, Message, Summary
from largefiles.models import LargeFile


class Format(models.TextChoices):
    CLAUDE_CODE = "claude-code"
    ANTHROPIC = "anthropic"
    OPENAI = "openai"
    JSONL = "jsonl"
    LOSSLESS_CLAW = "lossless-claw"
    CODEX = "codex"
    OPENCODE = "opencode"
    GEMINI = "gemini"


class ImportedConversation(models.Model):
    """A conversation created by an import; a later import of the same source extends it."""

    conversation = models.OneToOneField(
        Conversation, primary_key=True, on_delete=models.PROTECT, related_name="import_source"
    )
    format = models.CharField(max_length=16, choices=Format.choices)
    source_key = models.CharField(max_length=255)  # e.g. the lossless-claw conversation_id
    source_path = models.TextField(blank=True, default="")
    # lossless-claw: the source's context_items as last imported (to see whether it changed).
    context_signature = models.CharField(max_length=64, blank=True, default="")
    imported_at = models.DateTimeField(auto_now=True)
    # What the coding agent said about its session beyond its origin (agent, project, model,
    # times: conversations.ConversationOrigin, where search filters on them): session_meta,
    # turn contexts, why a branch or sub-agent exists.
    metadata = models.JSONField(default=dict, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(format__in=Format.values), name="imported_conversation_format_valid"
            )
        ]

    def __str__(self) -> str:
        return f"{self.format}:{self.source_key} -> {self.conversation_id}"


class ImportedMessage(models.Model):
    """The source's view of one imported message (its id, seq and token count)."""

    message = models.OneToOneField(
        Message, primary_key=True, on_delete=models.PROTECT, related_name="import_source"
    )
    conversation = models.ForeignKey(Conversation, on_delete=models.PROTECT, related_name="+")
    source_id = models.CharField(max_length=255)
    source_token_count = models.IntegerField(null=True, blank=True)
    source = models.JSONField(default=dict, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["conversation", "source_id"], name="imported_message_source_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.source_id} -> message {self.message_id}"


class ImportedSummary(models.Model):
    summary = models.OneToOneField(
        Summary, primary_key=True, on_delete=models.PROTECT, related_name="import_source"
    )
    source_token_count = models.IntegerField(null=True, blank=True)
    source = models.JSONField(default=dict, blank=True)

    def __str__(self) -> str:
        return str(self.summary_id)


class AgentCompactionRepair(models.Model):
    """What this product handed back to a coding agent after the agent compacted its own
    session (docs/capture.md, "Repair after the agent's compaction"): the addendum beside
    the agent compaction's summary (an `ImportedSummary` of kind `agent_compaction`), what
    the agent's summary kept and dropped of the span's handles and relation probes, and
    what the two keep together. One per agent compaction; written once."""

    summary = models.OneToOneField(
        Summary, primary_key=True, on_delete=models.PROTECT, related_name="agent_repair"
    )
    text = models.TextField(blank=True, default="")  # "" when the summary lost nothing
    tokens = models.IntegerField(default=0)
    budget = models.IntegerField()
    # [{"kind", "text", "refs"}]: each line of the addendum, in order
    items = models.JSONField(default=list, blank=True)
    # {"before", "after", "relations_before", "relations_after", "left_out"}
    measured = models.JSONField(default=dict, blank=True)
    path = models.CharField(max_length=32, default="deterministic")  # or model / model_replaced
    created_at = models.DateTimeField(auto_now_add=True)
    # [{"event": "SessionStart:compact", "at": iso time}]: when it reached the agent
    deliveries = models.JSONField(default=list, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(tokens__gte=0) & Q(budget__gte=0), name="agent_repair_sizes_valid"
            )
        ]

    def __str__(self) -> str:
        return f"repair of {self.summary_id} ({self.tokens} tokens)"


class ImportedFile(models.Model):
    """A large file of a source; `missing` when its bytes were not found at import."""

    large_file = models.OneToOneField(
        LargeFile, primary_key=True, on_delete=models.PROTECT, related_name="import_source"
    )
    source_id = models.CharField(max_length=64)
    source_uri = models.TextField(blank=True, default="")
    missing = models.BooleanField(default=False)

    def __str__(self) -> str:
        return f"{self.source_id}{' (missing)' if self.missing else ''}"


class JobState(models.TextChoices):
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class ImportJob(models.Model):
    """An upload imported in the background (`POST /api/v1/imports/`)."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="import_jobs"
    )
    format = models.CharField(max_length=16, choices=Format.choices)
    file_name = models.TextField(blank=True, default="")
    upload_path = models.TextField()
    session_id = models.CharField(max_length=255, blank=True, default="")
    dry_run = models.BooleanField(default=False)
    state = models.CharField(max_length=16, choices=JobState.choices, default=JobState.PENDING)
    progress_done = models.PositiveBigIntegerField(default=0)
    progress_total = models.PositiveBigIntegerField(null=True, blank=True)
    result = models.JSONField(null=True, blank=True)
    errors = models.JSONField(default=list, blank=True)  # [{"line", "message"}, ...]
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=JobState.values), name="import_job_state_valid"
            ),
            models.CheckConstraint(
                condition=Q(format__in=Format.values), name="import_job_format_valid"
            ),
        ]
        indexes = [models.Index(fields=["owner", "-created_at"], name="import_job_owner_recent")]

    def __str__(self) -> str:
        return f"import {self.pk} ({self.format}, {self.state})"


class WatchedFile(models.Model):
    """How far `lcm_watch` has brought one agent session file into one target (this
    server's user, or a remote server): the byte offset after the last complete line
    acknowledged (append-only files) or the signature last imported (files rewritten
    whole), so a restarted watcher goes on where it stopped (docs/capture.md)."""

    target = models.CharField(max_length=255)  # "local:<username>" or the server's URL
    path = models.TextField()
    path_key = models.CharField(max_length=64)  # sha256 of the path: unique, indexable
    agent = models.CharField(max_length=32)
    format = models.CharField(max_length=16, choices=Format.choices)
    offset = models.BigIntegerField(default=0)  # bytes of complete lines done
    lines = models.IntegerField(default=0)  # complete lines up to `offset`
    head = models.CharField(max_length=64, blank=True, default="")  # sha256 of the first bytes
    signature = models.CharField(max_length=128, blank=True, default="")  # size:mtime:inode
    deleted = models.BooleanField(default=False)
    messages = models.IntegerField(default=0)  # messages this watcher added from the file
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["target", "path_key"], name="watched_file_unique")
        ]

    def __str__(self) -> str:
        return f"{self.path} @ {self.offset} -> {self.target}"


class JoinedRecord(models.Model):
    """One record of an agent session that is stored in another side's message: a session
    seen both through the drop-in and by the watcher, hooks or an import is stored once
    (docs/capture.md, "Seen through the drop-in too"). The side that came second does not
    store its copy; it writes one row per content key (a tool call or result id, a text,
    a thinking block) it found already stored, naming its own id for the record
    (`claude-code:<uuid>`, `codex:<session>:<line>`, `dropin:<chain hash>`), the message
    that holds it and what its record says beyond the content (the file's uuid, parent,
    time, model, usage). Messages and parts are never rewritten; these rows sit beside
    them."""

    conversation = models.ForeignKey(Conversation, on_delete=models.PROTECT, related_name="+")
    source_id = models.CharField(max_length=255)
    key = models.CharField(max_length=80)  # "call:<id>", "result:<id>", "text:<sha1>", …
    message = models.ForeignKey(Message, on_delete=models.PROTECT, related_name="joined_records")
    facts = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["conversation", "source_id", "key"], name="joined_record_unique"
            )
        ]
        indexes = [models.Index(fields=["message", "key"], name="joined_record_claim")]

    def __str__(self) -> str:
        return f"{self.source_id} [{self.key}] -> message {self.message_id}"
