"""A small, test-only compactor that builds a consistent summary DAG the way the engine
does: leaf summaries over runs of raw messages, a condensed summary over leaves, each
replacing its sources in the active context (at the first source's ordinal)."""

from __future__ import annotations

import secrets
from datetime import timedelta

from django.db.models import Max, Min
from django.utils import timezone

from conversations.models import (
    ContextItem,
    ItemType,
    Message,
    Summary,
    SummaryMessage,
    SummaryParent,
)
from core.token_estimate import estimate


def _summary(conversation, *, kind, depth, content, earliest, latest, file_ids=()):
    return Summary.objects.create(
        id=f"sum_{secrets.token_hex(8)}",
        conversation=conversation,
        kind=kind,
        depth=depth,
        content=content,
        token_count=estimate(content),
        earliest_at=earliest,
        latest_at=latest,
        file_ids=list(file_ids),
        created_at=timezone.now(),
    )


def _replace(conversation, items: list[ContextItem], summary: Summary) -> None:
    first = min(item.ordinal for item in items)
    ContextItem.objects.filter(pk__in=[item.pk for item in items]).delete()
    ContextItem.objects.create(
        conversation=conversation,
        ordinal=first,
        item_type=ItemType.SUMMARY,
        summary=summary,
        token_count=summary.token_count,
    )


def leaf(conversation, seqs: range) -> Summary:
    """Summarize the raw messages with these seqs (they must be in the context)."""
    messages = list(Message.objects.filter(conversation=conversation, seq__in=seqs).order_by("seq"))
    items = list(ContextItem.objects.filter(conversation=conversation, message__in=messages))
    assert len(items) == len(messages) == len(seqs)
    times = [m.created_at for m in messages]
    summary = _summary(
        conversation,
        kind="leaf",
        depth=0,
        content=f"Leaf summary of messages {seqs.start}-{seqs.stop - 1}.",
        earliest=min(times),
        latest=max(times),
    )
    SummaryMessage.objects.bulk_create(
        SummaryMessage(summary=summary, message=m, conversation=conversation, ordinal=i)
        for i, m in enumerate(messages)
    )
    _replace(conversation, items, summary)
    return summary


def condense(conversation, sources: list[Summary]) -> Summary:
    depth = sources[0].depth + 1
    summary = _summary(
        conversation,
        kind="condensed",
        depth=depth,
        content=f"Condensed summary of {', '.join(s.id for s in sources)}.",
        earliest=min(s.earliest_at for s in sources),
        latest=max(s.latest_at for s in sources) + timedelta(0),
    )
    SummaryParent.objects.bulk_create(
        SummaryParent(summary=summary, parent_summary=s, conversation=conversation, ordinal=i)
        for i, s in enumerate(sources)
    )
    items = list(ContextItem.objects.filter(conversation=conversation, summary__in=sources))
    _replace(conversation, items, summary)
    return summary


def compact(conversation, *, leaf_size: int = 4, leaves: int = 3, condense_leaves: int = 2):
    """`leaves` leaf summaries of `leaf_size` messages from seq 1, the first
    `condense_leaves` of them condensed into one depth-1 summary."""
    made = [
        leaf(conversation, range(1 + i * leaf_size, 1 + (i + 1) * leaf_size)) for i in range(leaves)
    ]
    top = condense(conversation, made[:condense_leaves]) if condense_leaves >= 2 else None
    return made, top


def context_span(conversation) -> tuple[int, int]:
    found = ContextItem.objects.filter(conversation=conversation).aggregate(
        lo=Min("ordinal"), hi=Max("ordinal")
    )
    return found["lo"], found["hi"]
