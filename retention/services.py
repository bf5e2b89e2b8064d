"""Apply retention policies: archive planned ranges (archive.services), restore, and the
separate, explicit, audited deletion after an age (security's hard-delete path)."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from django.db.models import Exists, F, OuterRef, Sum
from django.db.models.functions import Length
from django.utils import timezone

from archive import segments
from archive.models import Segment, SegmentState
from archive.services import segment_archive, segment_restore
from conversations.models import Conversation, Message
from conversations.search.maintenance import message_index_optimize
from receipts.selectors import receipt_sizes
from retention.models import RetentionPolicy
from retention.policies import Range, deletion_due, effective_policy, plan_conversation

log = logging.getLogger(__name__)


def _policies_by_conversation(conversations: list[Conversation]) -> dict[int, dict]:
    owners = {c.owner_id for c in conversations}
    by_user = {p.user_id: p for p in RetentionPolicy.objects.filter(user_id__in=owners)}
    by_conv = {
        p.conversation_id: p
        for p in RetentionPolicy.objects.filter(conversation_id__in=[c.pk for c in conversations])
    }
    return {
        c.pk: {
            k: v
            for k, v in (("user", by_user.get(c.owner_id)), ("conversation", by_conv.get(c.pk)))
            if v is not None
        }
        for c in conversations
    }


def retention_plan(*, conversations: Iterable[Conversation] | None = None) -> list[Range]:
    conversations = list(conversations if conversations is not None else Conversation.objects.all())
    policies = _policies_by_conversation(conversations)
    ranges: list[Range] = []
    for conversation in conversations:
        policy = effective_policy(conversation, policies=policies[conversation.pk])
        ranges += plan_conversation(conversation, policy)
    return ranges


@dataclass
class ApplyResult:
    segments: int = 0
    messages: int = 0
    stored_bytes: int = 0
    raw_bytes: int = 0
    conflicts: int = 0
    # the run's memory.archived_content_policy.MemoryResult
    memory: dict = field(default_factory=dict)
    orphans_removed: int = 0
    deleted_conversations: list[int] = field(default_factory=list)
    # the database's size before and after the run (retention.storage.SpaceResult)
    database: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def retention_apply(
    *,
    ranges: list[Range],
    codec: str | None = None,
    max_segments: int | None = None,
    on_range: Callable[[Range], None] | None = None,
) -> ApplyResult:
    """Archive each planned range (one verified segment each); a range that changed under
    us (another archiver, compaction) is skipped and counted, never half-applied."""
    from core.api.errors import Conflict

    result = ApplyResult()
    conversations = Conversation.objects.in_bulk({r.conversation_id for r in ranges})
    for planned in ranges:
        if max_segments is not None and result.segments >= max_segments:
            break
        try:
            done = segment_archive(
                conversation=conversations[planned.conversation_id],
                seq_from=planned.seq_from,
                seq_to=planned.seq_to,
                codec=codec,
            )
        except Conflict:
            result.conflicts += 1
            continue
        finally:
            if on_range:
                on_range(planned)
        if done.segment is not None:
            result.segments += 1
            result.messages += done.archived
            result.stored_bytes += done.segment.stored_bytes
            result.raw_bytes += done.segment.raw_bytes
    if result.messages:
        message_index_optimize()  # SQLite: drop the FTS5 tombstones of the cleared content
    touched = [conversations[pk] for pk in sorted({r.conversation_id for r in ranges})]
    result.memory = retention_memory_apply(conversations=touched).as_dict()
    return result


def retention_memory_apply(*, conversations: Iterable[Conversation] | None = None):
    """Bring the memory of archived content (vectors, memory full-text rows) of each
    conversation with archived messages to its effective policy
    (memory.archived_content_policy). Runs after each apply and catches up a policy changed
    later or a run that stopped between the archive and this step."""
    from memory.archived_content_policy import MemoryResult, archived_memory_compress

    queryset = Conversation.objects.filter(
        Exists(Message.objects.filter(conversation_id=OuterRef("pk"), archived_in__isnull=False))
    )
    if conversations is not None:
        queryset = queryset.filter(pk__in=[c.pk for c in conversations])
    found = list(queryset.order_by("pk"))
    policies = _policies_by_conversation(found)
    total = MemoryResult()
    for conversation in found:
        policy = effective_policy(conversation, policies=policies[conversation.pk])
        total.add(
            archived_memory_compress(
                conversation_id=conversation.pk,
                vectors=policy.archived_vectors,
                fulltext=policy.archived_fulltext,
            )
        )
    return total


ORPHAN_GRACE = dt.timedelta(hours=1)


def orphan_objects(*, older_than: dt.timedelta | None = None) -> list[str]:
    """Segment objects no row names: left by a crash between write and commit, or by a hard
    delete. Safe to remove: the content they hold is still in the database (or was deleted).
    With `older_than`, only objects written before that long ago: an archive job in flight
    has written its object but not yet committed its row."""
    store = segments.storage()
    cutoff = timezone.now() - older_than if older_than else None
    # A restored segment's object is no longer needed (its content is back in the rows).
    known = set(Segment.objects.exclude(state=SegmentState.RESTORED).values_list("key", flat=True))
    found = []
    try:
        folders, _ = store.listdir("")
    except FileNotFoundError:
        return []
    for folder in folders:
        _, files = store.listdir(folder)
        for name in files:
            key = f"{folder}/{name}"
            if key in known:
                continue
            if cutoff is not None and store.get_modified_time(key) > cutoff:
                continue
            found.append(key)
    return sorted(found)


def orphans_remove(*, older_than: dt.timedelta = ORPHAN_GRACE) -> int:
    orphans = orphan_objects(older_than=older_than)
    for key in orphans:
        segments.delete(key)
    return len(orphans)


def retention_delete_due(
    *, conversations: Iterable[Conversation] | None = None, actor=None, via: str
) -> list[int]:
    """Hard-delete the conversations whose policy's delete_after_days has passed, each
    through security's audited hard-delete path. Off unless a policy sets the age."""
    from security.hard_delete import NotDeletable, hard_delete_conversation

    conversations = list(conversations if conversations is not None else Conversation.objects.all())
    policies = _policies_by_conversation(conversations)
    deleted = []
    for conversation in conversations:
        policy = effective_policy(conversation, policies=policies[conversation.pk])
        if not deletion_due(conversation, policy):
            continue
        try:
            hard_delete_conversation(
                conversation=conversation, confirm=str(conversation.pk), actor=actor, via=via
            )
        except NotDeletable:
            log.warning("retention: conversation %s belongs to a session", conversation.pk)
            continue
        deleted.append(conversation.pk)
    if deleted:
        orphans_remove()
    return deleted


def retention_restore(
    *, conversation: Conversation, seq_from: int = 1, seq_to: int | None = None
) -> int:
    """Restore every active segment of `conversation` overlapping [seq_from, seq_to]."""
    queryset = Segment.objects.filter(
        conversation=conversation, state=SegmentState.ACTIVE, seq_to__gte=seq_from
    )
    if seq_to is not None:
        queryset = queryset.filter(seq_from__lte=seq_to)
    from memory.archived_content_policy import archived_memory_expand

    restored = sum(segment_restore(segment=s) for s in queryset.order_by("seq_from"))
    # Then the memory: full-text rows back, vectors float32 again
    # (memory.archived_content_policy). It runs even when no segment was left to restore, so
    # a restore that stopped between the two steps is completed by running it again.
    archived_memory_expand(
        conversation_id=conversation.pk, seq_from=seq_from, seq_to=seq_to or 2**62
    )
    return restored


def retention_status(*, conversations: Iterable[Conversation] | None = None) -> dict:
    segs = Segment.objects.filter(state=SegmentState.ACTIVE)
    messages = Message.objects.all()
    if conversations is not None:
        ids = [c.pk for c in conversations]
        segs = segs.filter(conversation_id__in=ids)
        messages = messages.filter(conversation_id__in=ids)
    totals = segs.aggregate(stored=Sum("stored_bytes"), raw=Sum("raw_bytes"))
    return {
        "messages": messages.count(),
        "archived_messages": messages.filter(archived_in__isnull=False).count(),
        "segments": segs.count(),
        "archive_stored_bytes": totals["stored"] or 0,
        "archive_raw_bytes": totals["raw"] or 0,
        **_memory_status(conversations),
        # Receipts stay with their conversation: archiving leaves them (they refer to the
        # messages, whose archived content the replay reads back), hard delete removes them.
        **{
            f"receipt_{k}" if not k.startswith("receipt") else k: v
            for k, v in receipt_sizes(
                conversation_ids=None if conversations is None else [c.pk for c in conversations]
            ).items()
        },
        "orphan_objects": len(orphan_objects()),
    }


def _memory_status(conversations) -> dict:
    """How much of the memory of archived content is compressed, has no full-text row or
    keeps its text in the archive."""
    from memory.models import Chunk, ChunkVector

    chunks = Chunk.objects.all()
    if conversations is not None:
        chunks = chunks.filter(conversation_id__in=[c.pk for c in conversations])
    vectors = ChunkVector.objects.filter(chunk__in=chunks).annotate(
        stored=Length("vector"), dim=F("namespace__dim")
    )
    return {
        "memory_fulltext_dropped_chunks": chunks.filter(fulltext_dropped_at__isnull=False).count(),
        "memory_compressed_vectors": vectors.exclude(stored=F("dim") * 4).count(),
        "memory_text_archived_chunks": chunks.filter(text_archived_at__isnull=False).count(),
    }


def policy_set(*, user=None, conversation: Conversation | None = None, values: dict,
               actor, request=None) -> RetentionPolicy:  # fmt: skip
    """Create or update a user's or a conversation's policy; fields not given keep their
    value. A change of delete_after_days is audited (deletion is the one destructive policy)."""
    from django.db import transaction

    from core.audit import audit_record

    scope = {"user": user} if user is not None else {"conversation": conversation}
    # Not durable: the admin saves inside its own transaction (the audit row joins it).
    with transaction.atomic():
        policy, _ = RetentionPolicy.objects.select_for_update().get_or_create(**scope)
        old_delete = policy.delete_after_days
        for name, value in values.items():
            setattr(policy, name, value)
        policy.save()
        if policy.delete_after_days != old_delete:
            audit_record(
                action="retention.delete_policy_set",
                via="api" if request is not None else "admin",
                actor=actor,
                target_kind="user" if user is not None else "conversation",
                target_id=user.pk if user is not None else conversation.pk,
                request=request,
                details={"delete_after_days": policy.delete_after_days, "was": old_delete},
            )
    return policy


def policy_clear(
    *, user=None, conversation: Conversation | None = None, actor, request=None
) -> bool:
    from django.db import transaction

    from core.audit import audit_record

    scope = {"user": user} if user is not None else {"conversation": conversation}
    with transaction.atomic(durable=True):
        policy = RetentionPolicy.objects.filter(**scope).first()
        if policy is None:
            return False
        if policy.delete_after_days is not None:
            audit_record(
                action="retention.delete_policy_set",
                via="api",
                actor=actor,
                target_kind="user" if user is not None else "conversation",
                target_id=user.pk if user is not None else conversation.pk,
                request=request,
                details={"delete_after_days": None, "was": policy.delete_after_days},
            )
        policy.delete()
    return True


def retention_space_reclaim(*, result: ApplyResult, vacuum: bool = False) -> None:
    """The last step of a run: the database gives back what the run freed (SQLite; `vacuum`:
    rewrite the file whole), and the result says its size before and after."""
    from retention.storage import database_space_reclaim

    freed = result.raw_bytes
    if not freed and (result.deleted_conversations or any(result.memory.values())):
        freed = 1  # something went: the free pages are given back
    result.database = database_space_reclaim(freed_bytes=freed, vacuum=vacuum).as_dict()
