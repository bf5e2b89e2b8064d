"""`evaluate`: is compaction due for a conversation, and the figures behind the decision."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from django.conf import settings

from compaction.planning import context_rows, fresh_tail_start, raw_tokens_outside_tail
from conversations.models import Conversation


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
    rows = context_rows(conversation.pk)
    tail_start = fresh_tail_start(rows, settings.LCM_FRESH_TAIL_COUNT)
    context_tokens = sum(row.token_count for row in rows)
    active = sum(1 for row in rows if row.is_message)
    outside = raw_tokens_outside_tail(rows, tail_start)
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
        fresh_tail_items=len(rows) - tail_start,
    )
