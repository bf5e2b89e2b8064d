"""The effective policy of a conversation, and the plan of what it archives.

Only raw messages that are covered by a leaf summary and are no longer in the active context
are ever archived: the context assembler, the turn engine and compaction never read their
content from the database again, and `expand` reaches them through the archive port.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, field

from django.conf import settings
from django.db.models import Exists, OuterRef
from django.utils import timezone

from conversations.models import ContextItem, Conversation, Message, SummaryMessage
from retention.models import RetentionPolicy

FIELDS = (
    "archive_after_days",
    "keep_newest_tokens",
    "delete_after_days",
    "archived_vectors",
    "archived_fulltext",
)


@dataclass(frozen=True)
class Policy:
    archive_after_days: int
    keep_newest_tokens: int
    delete_after_days: int
    archived_vectors: str = "keep"  # keep | float16 | int8 (memory.archived_content_policy)
    archived_fulltext: str = "keep"  # keep | drop | archive
    source: dict = field(default_factory=dict)  # field -> "server" | "user" | "conversation"

    @property
    def archives(self) -> bool:
        return bool(self.archive_after_days or self.keep_newest_tokens)

    def as_dict(self) -> dict:
        return asdict(self)


def server_policy() -> Policy:
    return Policy(
        archive_after_days=settings.LCM_RETENTION_ARCHIVE_AFTER_DAYS,
        keep_newest_tokens=settings.LCM_RETENTION_KEEP_NEWEST_TOKENS,
        delete_after_days=settings.LCM_RETENTION_DELETE_AFTER_DAYS,
        archived_vectors=settings.LCM_RETENTION_ARCHIVED_VECTORS,
        archived_fulltext=settings.LCM_RETENTION_ARCHIVED_FULLTEXT,
        source=dict.fromkeys(FIELDS, "server"),
    )


def effective_policy(conversation: Conversation, *, policies: dict | None = None) -> Policy:
    """Server default, overridden by the owner's policy, overridden by the conversation's."""
    values = {name: getattr(server_policy(), name) for name in FIELDS}
    source = dict.fromkeys(FIELDS, "server")
    if policies is None:
        rows = RetentionPolicy.objects.filter(user_id=conversation.owner_id) | (
            RetentionPolicy.objects.filter(conversation_id=conversation.pk)
        )
        policies = {("user" if r.user_id else "conversation"): r for r in rows}
    for level in ("user", "conversation"):
        row = policies.get(level)
        if row is None:
            continue
        for name in FIELDS:
            value = getattr(row, name)
            if value is not None:
                values[name], source[name] = value, level
    return Policy(**values, source=source)


@dataclass
class Range:
    conversation_id: int
    seq_from: int
    seq_to: int
    messages: int
    tokens: int

    def as_dict(self) -> dict:
        return asdict(self)


def _token_cutoff(conversation: Conversation, keep: int) -> int:
    """The highest seq beyond the newest `keep` tokens (0 when everything fits)."""
    total = 0
    for seq, tokens in (
        Message.objects.filter(conversation=conversation)
        .order_by("-seq")
        .values_list("seq", "token_count")
        .iterator(chunk_size=5000)
    ):
        total += tokens
        if total > keep:
            return seq
    return 0


def plan_conversation(
    conversation: Conversation, policy: Policy, *, now: dt.datetime | None = None
) -> list[Range]:
    """Contiguous ranges of archivable messages, each at most LCM_ARCHIVE_SEGMENT_MESSAGES."""
    if not policy.archives:
        return []
    now = now or timezone.now()
    eligible = Message.objects.filter(conversation=conversation, archived_in__isnull=True)
    limits = []
    if policy.keep_newest_tokens:
        cutoff = _token_cutoff(conversation, policy.keep_newest_tokens)
        limits.append(("seq", cutoff))
    if policy.archive_after_days:
        limits.append(("age", now - dt.timedelta(days=policy.archive_after_days)))
    # "older than an age, OR beyond the newest N tokens"
    from django.db.models import Q

    condition = Q(pk__in=[])
    for kind, value in limits:
        condition |= Q(seq__lte=value) if kind == "seq" else Q(created_at__lt=value)
    rows = (
        eligible.filter(condition)
        .filter(Exists(SummaryMessage.objects.filter(message_id=OuterRef("pk"))))
        .exclude(Exists(ContextItem.objects.filter(message_id=OuterRef("pk"))))
        .order_by("seq")
        .values_list("seq", "token_count")
    )
    size = settings.LCM_ARCHIVE_SEGMENT_MESSAGES
    ranges: list[Range] = []
    for seq, tokens in rows.iterator(chunk_size=5000):
        last = ranges[-1] if ranges else None
        if last is None or seq != last.seq_to + 1 or last.messages >= size:
            ranges.append(Range(conversation.pk, seq, seq, 1, tokens))
        else:
            last.seq_to, last.messages, last.tokens = seq, last.messages + 1, last.tokens + tokens
    return ranges


def deletion_due(conversation: Conversation, policy: Policy, *, now=None) -> bool:
    if not policy.delete_after_days:
        return False
    now = now or timezone.now()
    return conversation.updated_at < now - dt.timedelta(days=policy.delete_after_days)
