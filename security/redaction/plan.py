"""The dry run: every place a redaction would touch, with counts, written nowhere.

It also gathers what the job seals: for a regex, the distinct strings it matches in the
scope (verify looks for exactly those afterwards); for a message or a span, the text it
removes."""

from __future__ import annotations

import copy

from archive.models import Segment, SegmentState
from conversations.archive_port import hydrate_messages
from conversations.models import ARCHIVED_PART_COLUMNS, Message, MessagePart
from largefiles.models import LargeFile
from security.models import AuditEvent
from security.redaction import files, memory_units, rows, streams, summaries
from security.redaction.canonical import rewrite_form
from security.redaction.context import JobContext

_BATCH = 500


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]  # keys are structure
    return []


def form_strings(form: dict, *, columns=ARCHIVED_PART_COLUMNS) -> list[str]:
    """Every string of a message's form: its content and its parts' content columns."""
    found = [form["content"]]
    for part in form["parts"]:
        for column in columns:
            found += _strings(part[column])
    return [s for s in found if s]


# What a whole message's redaction looks for afterwards: its text, not the structure its
# metadata shares with other rows (a summary id, `"trigger_reason": "manual"`); the
# metadata is replaced all the same.
TEXT_COLUMNS = tuple(c for c in ARCHIVED_PART_COLUMNS if c != "metadata")


def message_forms(conversation_ids: list[int], message_ids: list[int] | None):
    """(form, archived) of every message of the scope (or of `message_ids`), archived
    content read from its segment."""
    queryset = Message.objects.filter(conversation_id__in=conversation_ids).order_by("pk")
    if message_ids is not None:
        queryset = queryset.filter(pk__in=message_ids)
    last = 0
    while True:
        batch = hydrate_messages(queryset.filter(pk__gt=last).prefetch_related("parts")[:_BATCH])
        if not batch:
            return
        last = batch[-1].pk
        for message in batch:
            form = {
                "id": message.pk,
                "content": message.content,
                "parts": [
                    {"id": p.pk, **{c: getattr(p, c) for c in ARCHIVED_PART_COLUMNS}}
                    for p in message.parts.all()
                ],
            }
            yield form, message.from_archive


def part_ordinals(message_ids: list[int]) -> dict[int, list[int]]:
    """The redaction's reader (`message_forms`), for the integrity check
    `part_reader_disorder`."""
    conversation_ids = list(
        Message.objects.filter(pk__in=message_ids).values_list("conversation_id", flat=True)
    )
    forms = [form for form, _ in message_forms(conversation_ids, list(message_ids))]
    ordinal_of = dict(
        MessagePart.objects.filter(message_id__in=message_ids).values_list("pk", "ordinal")
    )
    return {form["id"]: [ordinal_of[p["id"]] for p in form["parts"]] for form in forms}


def _messages(ctx: JobContext, found: set[str]) -> dict:
    counts = {"messages": 0, "parts": 0, "archived_messages": 0}
    ids = []
    only = ctx.row.message_ids if ctx.row.selector_kind in ("messages", "span") else None
    for form, archived in message_forms(ctx.row.conversation_ids, only):
        for text in form_strings(form):
            found.update(ctx.matcher.found(text))
        before = copy.deepcopy(form)
        if not rewrite_form(form, ctx):
            continue
        ids.append(form["id"])
        counts["archived_messages" if archived else "messages"] += 1
        counts["parts"] += sum(a != b for a, b in zip(before["parts"], form["parts"], strict=True))
    ctx.row.message_ids = sorted(set(ctx.row.message_ids) | set(ids))
    return counts


def exports_on_record(conversation_ids: list[int], session_ids: list[str]) -> list[dict]:
    """Exports taken of the scope before now: the product cannot reach those copies."""
    events = AuditEvent.objects.filter(action="export")
    listed = []
    for event in events.order_by("created_at"):
        kind, target = event.target_kind, event.target_id
        if (kind == "conversation" and target in {str(i) for i in conversation_ids}) or (
            kind == "session" and target in set(session_ids)
        ):
            listed.append(
                {
                    "audit_id": event.pk,
                    "at": event.created_at.isoformat(),
                    "target_kind": kind,
                    "target_id": target,
                    "by": event.actor_name,
                }
            )
    return listed


def _files(ctx: JobContext, found: set[str]) -> dict:
    counts = {"files": 0, "explorations": 0}
    whole = files.whole_files(ctx)
    for large_file in LargeFile.objects.filter(conversation_id__in=ctx.row.conversation_ids):
        stored = files.read_object(large_file.storage_key)
        found.update(ctx.matcher.found(stored.decode(errors="ignore")))
        _, changed = files.redacted_bytes(large_file, ctx, whole)
        if changed:
            counts["files"] += 1
        text = large_file.exploration_summary + "\n" + large_file.file_name
        if ctx.matcher.found(text) or (large_file.pk in whole and large_file.exploration_summary):
            counts["explorations"] += 1
    return counts


def plan(ctx: JobContext) -> tuple[dict, list[str]]:
    """(places and counts, the matched strings). Sets `ctx.row.message_ids`."""
    found: set[str] = set()
    places: dict = {"canonical": _messages(ctx, found)}
    segments = Segment.objects.filter(
        state=SegmentState.ACTIVE,
        pk__in=Message.objects.filter(pk__in=ctx.row.message_ids or [0]).values("archived_in"),
    )
    places["archive_segments"] = segments.count()
    regenerated = summaries.affected(ctx)
    for summary in regenerated:
        found.update(ctx.matcher.found(summary.content))
    by_depth: dict[str, int] = {}
    for summary in regenerated:
        by_depth[f"depth_{summary.depth}"] = by_depth.get(f"depth_{summary.depth}", 0) + 1
    places["summaries"] = {"total": len(regenerated), **by_depth}
    units = memory_units.affected(ctx)
    places["memory_units"] = len(units)
    places["full_text_rows"] = places["canonical"]["messages"] + len(regenerated) + len(units)
    places["large_files"] = _files(ctx, found)
    collected = rows.scope_rows(ctx)
    places["rows"] = {
        model._meta.label: n
        for model, ids in collected.items()
        if model not in rows.OWNED and (n := rows.scrub_model(model, ids, ctx, dry=True))
    }
    journals = [p for p in streams.paths_of(ctx) if streams.scrub_file(p, ctx, dry=True)]
    places["journals"] = len(journals)
    places["exports_on_record"] = exports_on_record(ctx.row.conversation_ids, ctx.row.session_ids)
    return places, sorted(found)
