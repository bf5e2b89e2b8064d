"""A small test-only builder that writes a consistent summary DAG the way compaction does:
leaf summaries over runs of messages, condensed summaries over runs of leaves (and of
condensed ones), and the active context rewritten to [top summaries..., fresh tail...].

Used where a test needs an exact, known DAG shape; the acceptance tests use the real
compaction engine instead."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from django.db import transaction
from django.utils import timezone

from conversations.models import (
    ContextItem,
    Conversation,
    ItemType,
    Message,
    Summary,
    SummaryKind,
    SummaryMessage,
    SummaryParent,
)


@dataclass
class BuiltDag:
    leaves: list[Summary] = field(default_factory=list)
    condensed: list[list[Summary]] = field(default_factory=list)  # one list per depth >= 1
    top: list[Summary] = field(default_factory=list)
    tail: list[Message] = field(default_factory=list)


def _summary(
    conversation,
    *,
    kind,
    depth,
    content,
    token_count,
    earliest,
    latest,
    file_ids,
    descendant_count=0,
    descendant_token_count=0,
    source_token_count=0,
) -> Summary:
    return Summary.objects.create(
        descendant_count=descendant_count,
        descendant_token_count=descendant_token_count,
        source_token_count=source_token_count,
        file_ids=list(dict.fromkeys(file_ids)),
        id="sum_" + secrets.token_hex(8),
        conversation=conversation,
        kind=kind,
        depth=depth,
        content=content,
        token_count=token_count,
        earliest_at=earliest,
        latest_at=latest,
        created_at=timezone.now(),
    )


def build_dag(
    conversation: Conversation,
    *,
    leaf_size: int = 10,
    fanout: int = 4,
    max_depth: int = 2,
    tail: int = 8,
    leaf_text=None,
    stored_count_scale: float = 1.0,
) -> BuiltDag:
    """Summarize every message but the newest `tail` ones; condense up to `max_depth`.
    `stored_count_scale` distorts the stored token counts (to prove nothing relies on
    them for correctness)."""
    messages = list(Message.objects.filter(conversation=conversation).order_by("seq"))
    cut = max(0, len(messages) - tail)
    old, fresh = messages[:cut], messages[cut:]
    built = BuiltDag(tail=fresh)
    with transaction.atomic():
        for start in range(0, len(old), leaf_size):
            run = old[start : start + leaf_size]
            text = (
                leaf_text(run)
                if leaf_text
                else f"Leaf summary of messages {run[0].seq}-{run[-1].seq}."
            )
            leaf = _summary(
                conversation,
                kind=SummaryKind.LEAF,
                depth=0,
                content=text,
                token_count=20,
                earliest=run[0].created_at,
                latest=run[-1].created_at,
                file_ids=[f for m in run for f in m.file_ids],
                descendant_token_count=int(sum(m.token_count for m in run) * stored_count_scale),
                source_token_count=int(sum(m.token_count for m in run) * stored_count_scale),
            )
            SummaryMessage.objects.bulk_create(
                SummaryMessage(summary=leaf, message=m, conversation=conversation, ordinal=i)
                for i, m in enumerate(run)
            )
            built.leaves.append(leaf)
        level = built.leaves
        for depth in range(1, max_depth + 1):
            if len(level) < 2:
                break
            upper = []
            for start in range(0, len(level), fanout):
                group = level[start : start + fanout]
                node = _summary(
                    conversation,
                    kind=SummaryKind.CONDENSED,
                    depth=depth,
                    content=f"Condensed depth {depth} of {', '.join(s.id for s in group)}.",
                    token_count=30,
                    earliest=group[0].earliest_at,
                    latest=group[-1].latest_at,
                    file_ids=[f for s in group for f in s.file_ids],
                    descendant_count=sum(1 + s.descendant_count for s in group),
                    descendant_token_count=sum(s.descendant_token_count for s in group),
                    source_token_count=sum(s.token_count for s in group),
                )
                SummaryParent.objects.bulk_create(
                    SummaryParent(
                        summary=node, parent_summary=s, conversation=conversation, ordinal=i
                    )
                    for i, s in enumerate(group)
                )
                upper.append(node)
            built.condensed.append(upper)
            level = upper
        built.top = level
        ContextItem.objects.filter(conversation=conversation).delete()
        items = [
            ContextItem(
                conversation=conversation,
                ordinal=i + 1,
                item_type=ItemType.SUMMARY,
                summary=s,
                token_count=s.token_count,
            )
            for i, s in enumerate(built.top)
        ]
        items += [
            ContextItem(
                conversation=conversation,
                ordinal=len(built.top) + i + 1,
                item_type=ItemType.MESSAGE,
                message=m,
                token_count=m.token_count,
            )
            for i, m in enumerate(fresh)
        ]
        ContextItem.objects.bulk_create(items)
    return built
