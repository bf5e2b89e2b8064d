"""The canonical store: conversations, messages and their parts, summaries with lineage,
the ordered active context, and large files.

Messages, parts, summaries and lineage edges are immutable once written: no code path
updates or deletes them. The only mutable rows are `ContextItem` (the active view that
compaction rewrites) and the counters on `Conversation`.

Rules the database enforces itself (tests in tests/conversations/test_constraints.py):
unique seq and ordinals, checked enumerations, exactly-one context reference, no self
edge. Migration 0002 adds what the ORM cannot say: ON DELETE RESTRICT on lineage and
context references and same-conversation guards (composite foreign keys on PostgreSQL,
triggers on SQLite), plus the full-text and trigram search storage.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class Role(models.TextChoices):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class PartType(models.TextChoices):
    TEXT = "text"
    REASONING = "reasoning"
    TOOL = "tool"
    PATCH = "patch"
    FILE = "file"
    SUBTASK = "subtask"
    COMPACTION = "compaction"
    STEP_START = "step_start"
    STEP_FINISH = "step_finish"
    SNAPSHOT = "snapshot"
    AGENT = "agent"
    RETRY = "retry"


class SummaryKind(models.TextChoices):
    LEAF = "leaf"
    CONDENSED = "condensed"


class SummaryLevel(models.TextChoices):
    """Which escalation level produced the text: a fallback is marked as such."""

    NORMAL = "normal"
    AGGRESSIVE = "aggressive"
    FALLBACK = "fallback"


class ItemType(models.TextChoices):
    MESSAGE = "message"
    SUMMARY = "summary"


class SecretPolicy(models.TextChoices):
    """What ingest does with a secret it finds (docs/security.md, "Secrets at ingest")."""

    MASK = "mask"  # replaced by a typed marker before anything is stored
    FLAG = "flag"  # stored as sent, recorded as a finding for review
    OFF = "off"  # not scanned


def _in(field: str, choices: type[models.TextChoices]) -> Q:
    return Q(**{f"{field}__in": choices.values})


class Conversation(models.Model):
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="conversations"
    )
    session_id = models.CharField(max_length=255)
    title = models.TextField(blank=True, default="")
    token_budget = models.PositiveIntegerField()
    # Counters, advanced under the row lock by every append, so seq and ordinal are gap-free.
    last_seq = models.BigIntegerField(default=0)
    last_context_ordinal = models.BigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # Secrets at ingest: this conversation's policy; blank inherits the owner's, then the
    # server's (LCM_SECRET_POLICY).
    secret_policy = models.CharField(
        max_length=8, blank=True, default="", db_default="", choices=SecretPolicy.choices
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "session_id"], name="conversation_owner_session_unique"
            ),
            models.CheckConstraint(
                condition=Q(secret_policy="") | _in("secret_policy", SecretPolicy),
                name="conversation_secret_policy_valid",
            ),
            models.CheckConstraint(
                condition=Q(token_budget__gt=0), name="conversation_budget_positive"
            ),
            models.CheckConstraint(
                condition=Q(last_seq__gte=0), name="conversation_last_seq_nonnegative"
            ),
        ]
        indexes = [models.Index(fields=["owner", "-updated_at"], name="conversation_owner_recent")]

    def __str__(self) -> str:
        return f"{self.session_id} (#{self.pk})"


class Message(models.Model):
    # db_index=False: the unique (conversation, seq) index already serves conversation lookups.
    conversation = models.ForeignKey(
        Conversation, on_delete=models.PROTECT, related_name="messages", db_index=False
    )
    seq = models.BigIntegerField()
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.TextField()
    token_count = models.PositiveIntegerField()
    created_at = models.DateTimeField()
    external_id = models.CharField(max_length=255, null=True, blank=True)
    # Large files this message refers to (file_<16 hex>), recorded at ingest.
    file_ids = models.JSONField(default=list, blank=True)
    # Retention (docs/retention.md): the archive segment (archive.Segment id) that holds this
    # message's content and its parts' content, which the database then no longer keeps. The
    # one permitted change to a canonical row (migration 0008): clear to archive, restore.
    archived_in = models.BigIntegerField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["conversation", "seq"], name="message_conversation_seq_unique"
            ),
            models.UniqueConstraint(
                fields=["conversation", "external_id"],
                condition=Q(external_id__isnull=False),
                name="message_conversation_external_id_unique",
            ),
            models.CheckConstraint(condition=_in("role", Role), name="message_role_valid"),
            models.CheckConstraint(condition=Q(seq__gte=1), name="message_seq_positive"),
        ]

    def __str__(self) -> str:
        return f"#{self.seq} {self.role}"


class MessagePart(models.Model):
    """A typed content block of a message; columns follow the spec's message_parts table."""

    message = models.ForeignKey(
        Message, on_delete=models.PROTECT, related_name="parts", db_index=False
    )
    session_id = models.CharField(max_length=255)
    part_type = models.CharField(max_length=16, choices=PartType.choices)
    ordinal = models.PositiveIntegerField()
    text_content = models.TextField(null=True, blank=True)
    is_ignored = models.BooleanField(null=True, blank=True)
    is_synthetic = models.BooleanField(null=True, blank=True)
    tool_call_id = models.CharField(max_length=255, null=True, blank=True)
    tool_name = models.CharField(max_length=255, null=True, blank=True)
    tool_status = models.CharField(max_length=64, null=True, blank=True)
    tool_input = models.JSONField(null=True, blank=True)
    tool_output = models.TextField(null=True, blank=True)
    tool_error = models.TextField(null=True, blank=True)
    tool_title = models.TextField(null=True, blank=True)
    patch_hash = models.CharField(max_length=255, null=True, blank=True)
    patch_files = models.JSONField(null=True, blank=True)  # a list of paths (TEXT[] in the spec)
    file_mime = models.CharField(max_length=255, null=True, blank=True)
    file_name = models.TextField(null=True, blank=True)
    file_url = models.TextField(null=True, blank=True)
    subtask_prompt = models.TextField(null=True, blank=True)
    subtask_desc = models.TextField(null=True, blank=True)
    subtask_agent = models.CharField(max_length=255, null=True, blank=True)
    step_reason = models.TextField(null=True, blank=True)
    step_cost = models.DecimalField(max_digits=20, decimal_places=8, null=True, blank=True)
    step_tokens_in = models.IntegerField(null=True, blank=True)
    step_tokens_out = models.IntegerField(null=True, blank=True)
    snapshot_hash = models.CharField(max_length=255, null=True, blank=True)
    compaction_auto = models.BooleanField(null=True, blank=True)
    metadata = models.JSONField(null=True, blank=True)

    class Meta:
        # A message's parts are a sequence: every read, prefetches included, gets them in
        # ordinal order (PostgreSQL returns an unordered read in heap order, which updates,
        # archiving and redaction change; integrity's `part_reader_disorder` watches).
        ordering = ["ordinal"]
        constraints = [
            models.UniqueConstraint(
                fields=["message", "ordinal"], name="part_message_ordinal_unique"
            ),
            models.CheckConstraint(condition=_in("part_type", PartType), name="part_type_valid"),
        ]
        indexes = [models.Index(fields=["part_type"], name="part_type_idx")]

    def __str__(self) -> str:
        return f"{self.part_type} #{self.ordinal}"


class Summary(models.Model):
    id = models.CharField(primary_key=True, max_length=32)  # sum_ + 16 hex
    conversation = models.ForeignKey(
        Conversation, on_delete=models.PROTECT, related_name="summaries"
    )
    kind = models.CharField(max_length=16, choices=SummaryKind.choices)
    depth = models.PositiveSmallIntegerField()
    level = models.CharField(
        max_length=16, choices=SummaryLevel.choices, default=SummaryLevel.NORMAL
    )
    content = models.TextField()
    token_count = models.PositiveIntegerField()
    earliest_at = models.DateTimeField()
    latest_at = models.DateTimeField()
    descendant_count = models.PositiveIntegerField(
        default=0
    )  # summaries below this one, transitively
    descendant_token_count = models.PositiveBigIntegerField(default=0)  # raw message tokens below
    source_token_count = models.PositiveBigIntegerField(default=0)  # tokens of the direct sources
    model = models.CharField(max_length=255, blank=True, default="")
    file_ids = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        verbose_name_plural = "summaries"
        constraints = [
            models.CheckConstraint(condition=_in("kind", SummaryKind), name="summary_kind_valid"),
            models.CheckConstraint(
                condition=_in("level", SummaryLevel), name="summary_level_valid"
            ),
            models.CheckConstraint(
                condition=Q(kind=SummaryKind.LEAF, depth=0)
                | Q(kind=SummaryKind.CONDENSED, depth__gte=1),
                name="summary_kind_matches_depth",
            ),
            models.CheckConstraint(
                condition=Q(earliest_at__lte=models.F("latest_at")),
                name="summary_time_range_ordered",
            ),
            models.CheckConstraint(condition=Q(id__startswith="sum_"), name="summary_id_prefixed"),
        ]
        indexes = [
            models.Index(fields=["conversation", "created_at"], name="summary_conv_created"),
            models.Index(fields=["conversation", "depth"], name="summary_conv_depth"),
        ]

    def __str__(self) -> str:
        return self.id


class SummaryMessage(models.Model):
    """Ordered edge: a leaf summary and one of its source messages."""

    summary = models.ForeignKey(
        Summary, on_delete=models.PROTECT, related_name="message_links", db_index=False
    )
    message = models.ForeignKey(Message, on_delete=models.PROTECT, related_name="summary_links")
    conversation = models.ForeignKey(Conversation, on_delete=models.PROTECT, related_name="+")
    ordinal = models.PositiveIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["summary", "message"], name="summary_message_unique"),
            models.UniqueConstraint(
                fields=["summary", "ordinal"], name="summary_message_ordinal_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.summary_id} <- message {self.message_id}"


class SummaryParent(models.Model):
    """Ordered edge: a condensed summary and one of its sources one depth below.

    Named as in the spec: the spec calls the source summaries "parents" (they are
    rendered as <parents> in the assembled XML), so `parent_summary` is a source.
    """

    summary = models.ForeignKey(
        Summary, on_delete=models.PROTECT, related_name="parent_links", db_index=False
    )
    parent_summary = models.ForeignKey(
        Summary, on_delete=models.PROTECT, related_name="child_links"
    )
    conversation = models.ForeignKey(Conversation, on_delete=models.PROTECT, related_name="+")
    ordinal = models.PositiveIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["summary", "parent_summary"], name="summary_parent_unique"
            ),
            models.UniqueConstraint(
                fields=["summary", "ordinal"], name="summary_parent_ordinal_unique"
            ),
            models.CheckConstraint(
                condition=~Q(summary=models.F("parent_summary")), name="summary_parent_no_self_edge"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.summary_id} <- {self.parent_summary_id}"


class ContextItem(models.Model):
    """One entry of the ordered active context: a raw message or a summary.

    `token_count` is copied from the (immutable) message or summary so that context
    pressure is one SUM over this table.
    """

    conversation = models.ForeignKey(
        Conversation, on_delete=models.PROTECT, related_name="context_items", db_index=False
    )
    ordinal = models.BigIntegerField()
    item_type = models.CharField(max_length=16, choices=ItemType.choices)
    message = models.ForeignKey(
        Message, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    summary = models.ForeignKey(
        Summary, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    token_count = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            # PostgreSQL: the unique index also carries what assembly reads, so reading a
            # context is an index-only scan (compaction leaves the heap sparse, and at the
            # default random_page_cost the planner preferred scanning all of it).
            models.UniqueConstraint(
                fields=["conversation", "ordinal"],
                include=["token_count", "message", "summary", "created_at"],
                name="context_item_ordinal_unique",
            ),
            models.CheckConstraint(
                condition=_in("item_type", ItemType), name="context_item_type_valid"
            ),
            models.CheckConstraint(
                condition=(
                    Q(item_type=ItemType.MESSAGE, message__isnull=False, summary__isnull=True)
                    | Q(item_type=ItemType.SUMMARY, summary__isnull=False, message__isnull=True)
                ),
                name="context_item_exactly_one_reference",
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.ordinal} {self.item_type} {self.message_id or self.summary_id}"


class OwnerSecretPolicy(models.Model):
    """A user's secret policy for all their conversations (a conversation's own wins)."""

    owner = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="secret_policy"
    )
    policy = models.CharField(max_length=8, choices=SecretPolicy.choices)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=_in("policy", SecretPolicy), name="owner_secret_policy_valid"
            )
        ]

    def __str__(self) -> str:
        return f"{self.owner_id}: {self.policy}"


class SecretAction(models.TextChoices):
    MASKED = "masked"
    FLAGGED = "flagged"


class SecretFinding(models.Model):
    """A secret that ingest found in a stored message: where and of what kind, never the
    secret itself nor a hash of it (a hash would confirm a guessed secret). Flagged ones
    are listed for review (API and admin)."""

    conversation = models.ForeignKey(
        Conversation, on_delete=models.PROTECT, related_name="secret_findings"
    )
    message = models.ForeignKey(Message, on_delete=models.PROTECT, related_name="+")
    kind = models.CharField(max_length=64)
    # The field of the message: "content", "parts[2].tool_output", "parts[0].tool_input.env.KEY"
    location = models.CharField(max_length=255)
    start = models.PositiveIntegerField()  # offsets in that field as sent
    end = models.PositiveIntegerField()
    action = models.CharField(max_length=8, choices=SecretAction.choices)
    created_at = models.DateTimeField()
    reviewed_at = models.DateTimeField(null=True, blank=True)
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=_in("action", SecretAction), name="secret_finding_action_valid"
            ),
            models.CheckConstraint(
                condition=Q(end__gt=models.F("start")), name="secret_finding_span_ordered"
            ),
        ]
        indexes = [
            models.Index(fields=["conversation", "action", "id"], name="secret_finding_review"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} in message {self.message_id} ({self.action})"


# Retention: the part columns an archive segment holds and the database clears (migration
# 0008 keeps its own copy in its triggers). Everything else of a part stays: its type,
# ordinal, tool call id and name, status, sizes and costs.
ARCHIVED_PART_COLUMNS = (
    "text_content", "tool_input", "tool_output", "tool_error", "tool_title", "patch_files",
    "file_name", "file_url", "subtask_prompt", "subtask_desc", "step_reason", "metadata",
)  # fmt: skip


class ConversationOrigin(models.Model):
    """Where a conversation comes from, when a coding agent wrote it (docs/capture.md):
    the agent, its version, the project directory it ran in, the git branch, the model and
    the session's first and last times. Written by the importers (importers.session_facts)
    and read here, below them, by grep's filters and the provenance of every hit
    (conversations.origins). A conversation made through the API has no row."""

    conversation = models.OneToOneField(
        Conversation, primary_key=True, on_delete=models.CASCADE, related_name="origin"
    )
    agent = models.CharField(max_length=32, blank=True, default="")
    agent_version = models.CharField(max_length=64, blank=True, default="")
    cwd = models.TextField(blank=True, default="")
    git_branch = models.CharField(max_length=255, blank=True, default="")
    model = models.CharField(max_length=255, blank=True, default="")
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["agent"], name="conversation_origin_agent")]

    def __str__(self) -> str:
        return f"{self.agent or '?'} {self.cwd} (#{self.conversation_id})"
