"""Context assembly: the bounded model input for the next call.

System content first; the fresh tail always; then older context items newest first while
they fit the budget (stopping at the first that does not, so the included history is one
contiguous stretch); chronological order restored. Summaries are rendered as XML with
their metadata and marked as untrusted data (`compaction.rendering`).

Cost grows with the number of active context items, never with history length: one query
for the items (with their message or summary), one for the included messages' parts, one
for the included condensed summaries' sources.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from django.conf import settings

from compaction import rendering
from compaction.planning import Row, fresh_tail_start
from conversations.models import (
    ContextItem,
    Conversation,
    ItemType,
    MessagePart,
    PartType,
    SummaryParent,
)
from conversations.tokens import estimate
from lcmsite.api.errors import InvalidInput

FORMATS = ("neutral", "anthropic", "openai")

_ITEM_FIELDS = (
    "id",
    "ordinal",
    "item_type",
    "token_count",
    "message_id",
    "message__seq",
    "message__role",
    "message__content",
    "message__created_at",
    "summary_id",
    "summary__kind",
    "summary__depth",
    "summary__level",
    "summary__descendant_count",
    "summary__earliest_at",
    "summary__latest_at",
    "summary__content",
)
_PART_FIELDS = (
    "message_id",
    "part_type",
    "ordinal",
    "text_content",
    "tool_call_id",
    "tool_name",
    "tool_input",
    "tool_output",
    "tool_error",
    "tool_status",
)


@dataclass
class AssembledContext:
    output: dict
    token_estimate: int
    token_budget: int
    format: str
    items: list[dict] = field(default_factory=list)  # included, chronological
    dropped: list[dict] = field(default_factory=list)  # did not fit, chronological

    def as_dict(self) -> dict:
        return {
            "format": self.format,
            "token_budget": self.token_budget,
            "token_estimate": self.token_estimate,
            **self.output,
            "items": self.items,
            "dropped": self.dropped,
        }


def _describe(record: dict, tokens: int) -> dict:
    if record["item_type"] == ItemType.MESSAGE:
        return {
            "type": "message",
            "ordinal": record["ordinal"],
            "id": record["message_id"],
            "seq": record["message__seq"],
            "role": record["message__role"],
            "tokens": tokens,
        }
    return {
        "type": "summary",
        "ordinal": record["ordinal"],
        "id": record["summary_id"],
        "kind": record["summary__kind"],
        "depth": record["summary__depth"],
        "tokens": tokens,
    }


def assemble_context(
    *,
    conversation: Conversation,
    token_budget: int | None = None,
    system: str | None = None,
    fmt: Literal["neutral", "anthropic", "openai"] = "neutral",
) -> AssembledContext:
    if fmt not in FORMATS:
        raise InvalidInput(f"format must be one of {', '.join(FORMATS)}", extra={"field": "format"})
    budget = conversation.token_budget if token_budget is None else token_budget
    if budget <= 0:
        raise InvalidInput(
            "token_budget must be a positive integer", extra={"field": "token_budget"}
        )
    records = list(
        ContextItem.objects.filter(conversation=conversation)
        .order_by("ordinal")
        .values(*_ITEM_FIELDS)
    )
    rows = [
        Row(
            r["id"],
            r["ordinal"],
            r["item_type"],
            r["message_id"],
            r["summary_id"],
            r["token_count"],
            r["message__role"],
            r["summary__depth"],
        )
        for r in records
    ]
    tail_start = fresh_tail_start(rows, settings.LCM_FRESH_TAIL_COUNT)
    system_tokens = estimate(system) if system else 0

    # The sources of every condensed summary in the context (not only the included ones),
    # so each summary is measured exactly as it will be rendered.
    parents: dict[str, list[str]] = {}
    condensed_ids = [
        r["summary_id"]
        for r in records
        if r["item_type"] == ItemType.SUMMARY and r["summary__kind"] == "condensed"
    ]
    if condensed_ids:
        for summary_id, parent_id in (
            SummaryParent.objects.filter(summary_id__in=condensed_ids)
            .order_by("summary_id", "ordinal")
            .values_list("summary_id", "parent_summary_id")
        ):
            parents.setdefault(summary_id, []).append(parent_id)
    xml = {
        r["summary_id"]: rendering.summary_xml(r, parents.get(r["summary_id"], ()))
        for r in records
        if r["item_type"] == ItemType.SUMMARY
    }
    costs = [
        r["token_count"] if r["item_type"] == ItemType.MESSAGE else estimate(xml[r["summary_id"]])
        for r in records
    ]
    used = system_tokens + sum(costs[tail_start:])
    first_included = tail_start
    for index in range(tail_start - 1, -1, -1):
        if used + costs[index] > budget:
            break
        used += costs[index]
        first_included = index
    included = records[first_included:]

    message_ids = [r["message_id"] for r in included if r["item_type"] == ItemType.MESSAGE]
    parts: dict[int, list[dict]] = {}
    if fmt != "neutral" and message_ids:
        for part in (
            MessagePart.objects.filter(message_id__in=message_ids)
            .exclude(part_type__in=[PartType.REASONING, PartType.COMPACTION])
            .order_by("message_id", "ordinal")
            .values(*_PART_FIELDS)
        ):
            parts.setdefault(part["message_id"], []).append(part)

    output = rendering.render(fmt, included, parts=parts, xml=xml, system=system)
    return AssembledContext(
        output=output,
        token_estimate=used,
        token_budget=budget,
        format=fmt,
        items=[_describe(r, c) for r, c in zip(included, costs[first_included:], strict=True)],
        dropped=[
            _describe(r, c)
            for r, c in zip(records[:first_included], costs[:first_included], strict=True)
        ],
    )
