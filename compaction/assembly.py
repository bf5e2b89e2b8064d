"""Context assembly: the bounded model input for the next call.

System content first; the fresh tail always; then older context items newest first while
they fit the budget (stopping at the first that does not, so the included history is one
contiguous stretch); chronological order restored. Summaries are rendered as XML with
their metadata and marked as untrusted data (`compaction.rendering`).

Cost grows with the number of active context items, never with history length: one query
for the items (with their message), one for the included messages' parts (not for the
neutral format), and, for summaries not yet in the process's rendering cache, one for
their rows (by primary key, never a join against the whole summary table) and one for the
condensed ones' sources.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Literal

from django.conf import settings
from django.db.models import CharField
from django.db.models.functions import Cast

from compaction import rendering
from compaction.planning import Row, fresh_tail_start
from conversations.models import (
    ContextItem,
    Conversation,
    ItemType,
    MessagePart,
    PartType,
    Summary,
    SummaryKind,
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
    "summary_id",
)
_SUMMARY_FIELDS = (
    "id",
    "kind",
    "depth",
    "level",
    "descendant_count",
    "earliest_at",
    "latest_at",
    "content",
)
# Rendered summary XML, its token count, kind and depth, by (summary id, the creation time
# of the context item that holds it). Summaries are immutable and their context item is
# written in the same transaction as the summary, so an entry never goes stale; the time is
# in the key because a test database that is reset can write a different summary under a
# reused id. The key comes from the items query itself: a warm call needs no summary query.
_XML_CACHE: OrderedDict[tuple[str, str], tuple[str, int, str, int]] = OrderedDict()
_XML_CACHE_SIZE = 50_000
_xml_lock = threading.Lock()


def clear_summary_cache() -> None:
    with _xml_lock:
        _XML_CACHE.clear()


def _summary_renderings(records: list[dict]) -> dict[str, tuple[str, int, str, int]]:
    """(XML, tokens, kind, depth) of every summary in the context: from the cache, else two
    queries (summary rows by primary key, then the sources of the condensed ones) for the
    missing ones. Also fills each summary record's kind and depth."""
    keys = {
        r["summary_id"]: (r["summary_id"], r["item_created"])
        for r in records
        if r["item_type"] == ItemType.SUMMARY
    }
    found: dict[str, tuple[str, int, str, int]] = {}
    with _xml_lock:
        for summary_id, key in keys.items():
            hit = _XML_CACHE.get(key)
            if hit is not None:
                _XML_CACHE.move_to_end(key)
                found[summary_id] = hit
    missing = [summary_id for summary_id in keys if summary_id not in found]
    if missing:
        details = {
            s["id"]: s for s in Summary.objects.filter(pk__in=missing).values(*_SUMMARY_FIELDS)
        }
        parents: dict[str, list[str]] = {}
        condensed = [i for i in missing if details[i]["kind"] == SummaryKind.CONDENSED]
        if condensed:
            for summary_id, parent_id in (
                SummaryParent.objects.filter(summary_id__in=condensed)
                .order_by("summary_id", "ordinal")
                .values_list("summary_id", "parent_summary_id")
            ):
                parents.setdefault(summary_id, []).append(parent_id)
        with _xml_lock:
            for summary_id in missing:
                row = details[summary_id]
                text = rendering.summary_xml(row, parents.get(summary_id, ()))
                entry = (text, estimate(text), row["kind"], row["depth"])
                found[summary_id] = _XML_CACHE[keys[summary_id]] = entry
            while len(_XML_CACHE) > _XML_CACHE_SIZE:
                _XML_CACHE.popitem(last=False)
    for r in records:
        entry = found.get(r["summary_id"]) if r["summary_id"] is not None else None
        r["summary__kind"], r["summary__depth"] = (entry[2], entry[3]) if entry else (None, None)
    return found


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
        .annotate(item_created=Cast("created_at", CharField()))
        .values(*_ITEM_FIELDS, "item_created")
    )
    summaries = _summary_renderings(records)
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

    xml = {summary_id: entry[0] for summary_id, entry in summaries.items()}
    costs = [
        r["token_count"] if r["item_type"] == ItemType.MESSAGE else summaries[r["summary_id"]][1]
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
