"""`evaluate`: is compaction due for a conversation, and the figures behind the decision."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from django.conf import settings
from django.db import connection

from compaction.models import CompactionJob
from conversations.models import ContextItem, Conversation, Message

# One statement (it runs after every append): the tail starts at the `tail_count`-th newest
# raw message or at the newest user message, whichever is older: `planning.fresh_tail_start`
# without its cap and call boundaries, which need the tool outputs (docs/compaction.md, "The
# fresh tail", says where the two differ); both are found walking the (conversation,
# ordinal) index backwards. Portable SQL: PostgreSQL 12+ and SQLite 3.35+ (MATERIALIZED keeps PostgreSQL
# from inlining the bounds into every CASE branch, which quadrupled its planning time).
_FIGURES_SQL = f"""
WITH tail AS (
    SELECT ordinal FROM {ContextItem._meta.db_table}
    WHERE conversation_id = %s AND item_type = 'message'
    ORDER BY ordinal DESC LIMIT %s
), newest_user AS (
    SELECT item.ordinal FROM {ContextItem._meta.db_table} item
    JOIN {Message._meta.db_table} message ON message.id = item.message_id
    WHERE item.conversation_id = %s AND item.item_type = 'message' AND message.role = 'user'
    ORDER BY item.ordinal DESC LIMIT 1
), bounds AS MATERIALIZED (
    SELECT (SELECT MIN(ordinal) FROM tail) AS t, (SELECT ordinal FROM newest_user) AS u
), tail_start AS MATERIALIZED (
    SELECT CASE WHEN t IS NULL THEN u WHEN u IS NULL OR t < u THEN t ELSE u END AS start
    FROM bounds
)
SELECT
    COALESCE(SUM(item.token_count), 0),
    COUNT(*),
    COALESCE(SUM(CASE WHEN item.item_type = 'message' THEN 1 ELSE 0 END), 0),
    COALESCE(SUM(CASE WHEN item.item_type = 'message'
        AND (tail_start.start IS NULL OR item.ordinal < tail_start.start)
        THEN item.token_count ELSE 0 END), 0),
    COALESCE(SUM(CASE WHEN item.ordinal >= tail_start.start THEN 1 ELSE 0 END), 0),
    (SELECT token_budget FROM {Conversation._meta.db_table} WHERE id = %s),
    (SELECT COUNT(*) FROM {CompactionJob._meta.db_table}
     WHERE conversation_id = %s AND state = 'pending')
FROM {ContextItem._meta.db_table} item CROSS JOIN tail_start
WHERE item.conversation_id = %s
"""

_PENDING_SQL = (
    f"SELECT 1 FROM {CompactionJob._meta.db_table}"
    " WHERE conversation_id = %s AND state = 'pending' LIMIT 1"
)


def pending_job_exists(conversation_id: int) -> bool:
    """One index probe (the one-pending-job unique index): the ingest hook asks this
    before the figures, which aggregate the whole context."""
    with connection.cursor() as cursor:
        cursor.execute(_PENDING_SQL, [conversation_id])
        return cursor.fetchone() is not None


def context_figures(conversation_id: int, tail_count: int) -> dict:
    """The figures from one aggregate statement (with the budget and the pending job
    count, which the scheduler needs too)."""
    params = [conversation_id, tail_count, conversation_id] + [conversation_id] * 3
    with connection.cursor() as cursor:
        cursor.execute(_FIGURES_SQL, params)
        tokens, count, messages, outside, tail_items, budget, pending = cursor.fetchone()
    return {
        "context_tokens": int(tokens),
        "context_items": int(count),
        "active_messages": int(messages),
        "raw_tokens_outside_tail": int(outside),
        "fresh_tail_items": int(tail_items),
        "token_budget": budget,  # None: no such conversation
        "pending_jobs": int(pending),
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
    # What an automatic until-under job compacts down to: LCM_COMPACTION_LOW_WATER x
    # budget, below the threshold, so that one pass buys many turns of a stable, cacheable
    # prefix (docs/cost.md).
    low_water_tokens: int = 0

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
    return decide(figures, token_budget=conversation.token_budget, manual=manual)


def decide(figures: dict, *, token_budget: int, manual: bool = False) -> Decision:
    context_tokens = figures["context_tokens"]
    active = figures["active_messages"]
    outside = figures["raw_tokens_outside_tail"]
    threshold_tokens = int(token_budget * settings.LCM_CONTEXT_THRESHOLD)
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
        token_budget=token_budget,
        threshold_tokens=threshold_tokens,
        active_messages=active,
        max_active_messages=settings.LCM_MAX_ACTIVE_MESSAGES,
        raw_tokens_outside_tail=outside,
        leaf_chunk_tokens=settings.LCM_LEAF_CHUNK_TOKENS,
        fresh_tail_items=figures["fresh_tail_items"],
        low_water_tokens=low_water_tokens(token_budget),
    )


def low_water_tokens(token_budget: int) -> int:
    """The automatic compaction target: the low-water mark, never above the threshold."""
    fraction = min(settings.LCM_COMPACTION_LOW_WATER, settings.LCM_CONTEXT_THRESHOLD)
    return int(token_budget * fraction)
