"""`evaluate`: is compaction due for a conversation, and the figures behind the decision."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from django.conf import settings
from django.db.models import Count, Q, Sum

from conversations.models import ContextItem, Conversation, ItemType, Role


def context_figures(conversation_id: int, tail_count: int) -> dict:
    """The figures from aggregates (a few indexed queries, no per-item rows), so the
    after-ingest check stays cheap however long the context is. The tail rule is the one
    of `planning.fresh_tail_start`: the newest `tail_count` raw messages, reaching back to
    the newest user message."""
    items = ContextItem.objects.filter(conversation_id=conversation_id)
    totals = items.aggregate(
        tokens=Sum("token_count"),
        count=Count("id"),
        messages=Count("id", filter=Q(item_type=ItemType.MESSAGE)),
    )
    messages = items.filter(item_type=ItemType.MESSAGE)
    tail_ordinals = list(
        messages.order_by("-ordinal").values_list("ordinal", flat=True)[:tail_count]
    )
    tail_start = tail_ordinals[-1] if tail_ordinals else None
    newest_user = (
        messages.filter(message__role=Role.USER)
        .order_by("-ordinal")
        .values_list("ordinal", flat=True)
        .first()
    )
    if newest_user is not None and (tail_start is None or newest_user < tail_start):
        tail_start = newest_user
    if tail_start is None:
        tail_items = 0
        outside = messages.aggregate(t=Sum("token_count"))["t"] or 0
    else:
        outside = messages.filter(ordinal__lt=tail_start).aggregate(t=Sum("token_count"))["t"] or 0
        tail_items = items.filter(ordinal__gte=tail_start).count()
    return {
        "context_tokens": totals["tokens"] or 0,
        "context_items": totals["count"],
        "active_messages": totals["messages"],
        "raw_tokens_outside_tail": outside,
        "fresh_tail_items": tail_items,
    }


@dataclass(frozen=True)
class Decision:
    due: bool
    reasons: tuple[str, ...]  # "threshold", "max_active_messages", "leaf_chunk", "manual"
    suggested_mode: str | None  # what an automatic job should run
    context_tokens: int
    token_budget: int
    threshold_tokens: int
    active_messages: int
    max_active_messages: int
    raw_tokens_outside_tail: int
    leaf_chunk_tokens: int
    fresh_tail_items: int

    def as_dict(self) -> dict:
        data = asdict(self)
        data["reasons"] = list(self.reasons)
        return data


def evaluate(*, conversation: Conversation, manual: bool = False) -> Decision:
    """Due when the context reaches `LCM_CONTEXT_THRESHOLD` x budget (until-under the
    threshold), when more than `LCM_MAX_ACTIVE_MESSAGES` raw messages are active (full
    sweep), when raw tokens outside the fresh tail exceed one leaf chunk (incremental), or
    on request."""
    figures = context_figures(conversation.pk, settings.LCM_FRESH_TAIL_COUNT)
    context_tokens = figures["context_tokens"]
    active = figures["active_messages"]
    outside = figures["raw_tokens_outside_tail"]
    threshold_tokens = int(conversation.token_budget * settings.LCM_CONTEXT_THRESHOLD)
    reasons: list[str] = []
    mode = None
    if context_tokens >= threshold_tokens:
        reasons.append("threshold")
        mode = "until_under"
    if active > settings.LCM_MAX_ACTIVE_MESSAGES:
        reasons.append("max_active_messages")
        mode = mode or "full"
    if outside > settings.LCM_LEAF_CHUNK_TOKENS:
        reasons.append("leaf_chunk")
        mode = mode or "incremental"
    if manual:
        reasons.append("manual")
        mode = mode or "full"
    return Decision(
        due=bool(reasons),
        reasons=tuple(reasons),
        suggested_mode=mode,
        context_tokens=context_tokens,
        token_budget=conversation.token_budget,
        threshold_tokens=threshold_tokens,
        active_messages=active,
        max_active_messages=settings.LCM_MAX_ACTIVE_MESSAGES,
        raw_tokens_outside_tail=outside,
        leaf_chunk_tokens=settings.LCM_LEAF_CHUNK_TOKENS,
        fresh_tail_items=figures["fresh_tail_items"],
    )
