"""Shared checks for compaction tests: lineage reachability and context validity, read
straight from the tables (independent of the code under test)."""

from __future__ import annotations

from conversations.models import ContextItem, Message, SummaryMessage, SummaryParent


def messages_reachable_from_context(conversation) -> set[int]:
    """Message ids reachable from the active context: raw items plus every message under a
    summary item, following summary_parents down to summary_messages."""
    items = list(
        ContextItem.objects.filter(conversation=conversation).values_list(
            "message_id", "summary_id"
        )
    )
    reached = {m for m, _ in items if m is not None}
    frontier = {s for _, s in items if s is not None}
    seen: set[str] = set()
    while frontier:
        seen |= frontier
        reached |= set(
            SummaryMessage.objects.filter(summary_id__in=frontier).values_list(
                "message_id", flat=True
            )
        )
        frontier = (
            set(
                SummaryParent.objects.filter(summary_id__in=frontier).values_list(
                    "parent_summary_id", flat=True
                )
            )
            - seen
        )
    return reached


def all_message_ids(conversation) -> set[int]:
    return set(Message.objects.filter(conversation=conversation).values_list("id", flat=True))


def context_tokens(conversation) -> int:
    return sum(
        ContextItem.objects.filter(conversation=conversation).values_list("token_count", flat=True)
    )


def context_in_message_order(conversation) -> bool:
    """Raw messages in the context appear in seq order, after everything they follow."""
    seqs = [
        seq
        for seq in ContextItem.objects.filter(conversation=conversation)
        .order_by("ordinal")
        .values_list("message__seq", flat=True)
        if seq is not None
    ]
    return seqs == sorted(seqs)
