"""Step "canonical": the messages and parts of the scope, rewritten in place under the
redaction permit (only the content columns; ids, seq, role, times never change). A whole
message becomes the marker; a span is replaced by it; a literal or regex match anywhere in
the content or a part is replaced by it. Archived messages are the "archive" step's.

`rewrite_form` is shared with that step: it redacts one message's canonical form (the
same columns, as a dict)."""

from __future__ import annotations

from django.db import transaction

from conversations.models import ARCHIVED_PART_COLUMNS, ContextItem, Message, MessagePart
from core.token_estimate import estimate
from security.redaction.context import JobContext
from security.redaction.permit import redact_permit

_BATCH = 500


def _whole(value, mark: str):
    if value is None or value == "":
        return value
    if isinstance(value, str):
        return mark
    return {"redacted": mark}


def rewrite_form(form: dict, ctx: JobContext) -> int:
    """Redact a message's form (`content` and `parts`, each a dict of columns) in place;
    how many places changed."""
    changed = 0
    if form["id"] in ctx.whole_messages:
        if form["content"] != ctx.mark:
            form["content"], changed = ctx.mark, 1
        for part in form["parts"]:
            for column in ARCHIVED_PART_COLUMNS:
                new = _whole(part[column], ctx.mark)
                if new != part[column]:
                    part[column], changed = new, changed + 1
        return changed
    span = ctx.span
    if span is not None and span["message_id"] == form["id"]:
        content = form["content"]
        if content[span["start"] : span["end"]] == ctx.sealed["needles"][0]:
            form["content"] = content[: span["start"]] + ctx.mark + content[span["end"] :]
            changed += 1
    content, n = ctx.matcher.sub(form["content"])
    form["content"], changed = content, changed + n
    for part in form["parts"]:
        for column in ARCHIVED_PART_COLUMNS:
            new, n = ctx.matcher.sub_value(part[column])
            if n:
                part[column], changed = new, changed + n
    return changed


def _form(message: Message, parts: list[MessagePart]) -> dict:
    return {
        "id": message.pk,
        "content": message.content,
        "parts": [{"id": p.pk, **{c: getattr(p, c) for c in ARCHIVED_PART_COLUMNS}} for p in parts],
    }


def _save(message: Message, parts: list[MessagePart], form: dict) -> None:
    tokens = estimate(form["content"])
    if parts:  # a message with parts stores at least its text's count (integrity rule)
        tokens = max(tokens, message.token_count)
    Message.objects.filter(pk=message.pk).update(content=form["content"], token_count=tokens)
    ContextItem.objects.filter(message_id=message.pk).update(token_count=tokens)
    by_id = {p["id"]: p for p in form["parts"]}
    for part in parts:
        values = {c: by_id[part.pk][c] for c in ARCHIVED_PART_COLUMNS}
        if any(values[c] != getattr(part, c) for c in values):
            MessagePart.objects.filter(pk=part.pk).update(**values)


def run(ctx: JobContext) -> dict:
    """Rewrite the live (not archived) messages of the scope; returns the counts and
    records the ids of the messages it changed on the job row."""
    queryset = Message.objects.filter(
        conversation_id__in=ctx.row.conversation_ids, archived_in__isnull=True
    ).order_by("pk")
    if ctx.row.selector_kind in ("messages", "span"):
        queryset = queryset.filter(pk__in=ctx.row.message_ids or [0])
    counts = {"messages": 0, "parts": 0}
    changed_ids: list[int] = []
    last = 0
    with transaction.atomic(), redact_permit():
        while True:
            batch = list(queryset.filter(pk__gt=last)[:_BATCH])
            if not batch:
                break
            last = batch[-1].pk
            parts: dict[int, list[MessagePart]] = {m.pk: [] for m in batch}
            for part in MessagePart.objects.filter(message_id__in=list(parts)).order_by("ordinal"):
                parts[part.message_id].append(part)
            for message in batch:
                form = _form(message, parts[message.pk])
                before = [dict(p) for p in form["parts"]]
                if not rewrite_form(form, ctx):
                    continue
                _save(message, parts[message.pk], form)
                changed_ids.append(message.pk)
                counts["messages"] += form["content"] != message.content
                counts["parts"] += sum(a != b for a, b in zip(before, form["parts"], strict=True))
    ctx.row.message_ids = sorted(set(ctx.row.message_ids) | set(changed_ids))
    return counts
