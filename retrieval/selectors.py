"""Reads for retrieval: describe, expand and the lineage traversals other apps use.

Stable names (the explorer pages use them too):
- `covering_summaries(conversation_id=, message_ids=)`: message id -> covering summary id
  in the active context (None when the message itself is in the active context);
- `summary_subtree(summary_id=, max_level=None)`: the summary and its descendants in DAG
  order, as `SubtreeNode`s;
- `summary_manifest(summary_id=)`: summaries per depth and source messages below it.
Every function that takes a `user` goes through the access checkpoint first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from django.conf import settings
from django.db.models import Q

from compaction.models import SummaryFidelity
from compaction.tail_outputs import OUTPUT_ID
from conversations.archive_port import archived_contents
from conversations.models import Message, MessagePart, Summary
from conversations.search.query import as_datetime
from conversations.selectors import conversations_visible_to
from core.api.errors import InvalidInput, NotFound
from largefiles.models import LargeFile
from retrieval import dag
from retrieval.dag import SubtreeNode

__all__ = [
    "ExpandResult",
    "SubtreeNode",
    "covering_summaries",
    "describe_for_user",
    "expand_for_user",
    "expand_summary",
    "summary_get_for_user",
    "summary_manifest",
    "summary_subtree",
]

MAX_EXPAND_DEPTH = 10


def covering_summaries(
    *, conversation_id: int, message_ids: Sequence[int]
) -> dict[int, str | None]:
    """For each message of the conversation: the id of the active-context summary whose
    lineage contains it, or None if the message itself is in the active context. One
    recursive query."""
    return dag.covering_summary_rows(message_ids, conversation_id)


def summary_subtree(*, summary_id: str, max_level: int | None = None) -> list[SubtreeNode]:
    """The summary (level 0) and every summary below it, in DAG order. One query."""
    return dag.subtree_rows(summary_id, max_level)


def summary_manifest(*, summary_id: str) -> dict:
    rows = dag.manifest_rows(summary_id)
    summaries = [
        {"depth": r.depth, "count": r.count, "tokens": int(r.tokens)}
        for r in rows
        if r.depth is not None
    ]
    messages = next((r for r in rows if r.depth is None), None)
    message_count = messages.count if messages else 0
    return {
        "summaries_by_depth": summaries,
        "summary_count": sum(s["count"] for s in summaries),
        "summary_tokens": sum(s["tokens"] for s in summaries),
        "message_count": message_count,
        "message_tokens": int(messages.tokens) if messages else 0,
        "source_seq_range": (
            [messages.min_seq, messages.max_seq] if message_count and messages else None
        ),
    }


def summary_get_for_user(*, user, summary_id: str) -> Summary:
    """A summary in a conversation the user may see; anything else is a 404."""
    summary = (
        Summary.objects.filter(pk=summary_id, conversation__in=conversations_visible_to(user))
        .select_related("conversation", "fidelity")
        .first()
    )
    if summary is None:
        raise NotFound(f"summary {summary_id} not found")
    return summary


# ---------------------------------------------------------------------------------------
# describe


def describe_summary(summary: Summary) -> dict:
    neighbours = dag.neighbour_rows(summary.pk)
    manifest = summary_manifest(summary_id=summary.pk)

    def ref(row):
        return {"id": row[1], "kind": row[2], "depth": row[3], "token_count": row[4]}

    return {
        "type": "summary",
        "id": summary.pk,
        "conversation_id": summary.conversation_id,
        "kind": summary.kind,
        "depth": summary.depth,
        "level": summary.level,
        "created_at": summary.created_at,
        "token_count": summary.token_count,
        "content": summary.content,
        "earliest_at": summary.earliest_at,
        "latest_at": summary.latest_at,
        "source_seq_range": manifest["source_seq_range"],
        "descendant_count": summary.descendant_count,
        "descendant_token_count": summary.descendant_token_count,
        "file_ids": summary.file_ids,
        "parents": [ref(r) for r in neighbours if r[0] == "parent"],
        "children": [ref(r) for r in neighbours if r[0] == "child"],
        "manifest": manifest,
        "fidelity": summary_fidelity(summary),
    }


def summary_fidelity(summary: Summary) -> dict | None:
    """What the summary keeps of its sources' handles (docs/compaction.md, "Fidelity"), or
    None for a summary written before fidelity was measured or by an import. Read with the
    summary (select_related) where the caller loaded it so."""
    try:
        row = summary.fidelity
    except SummaryFidelity.DoesNotExist:
        return None
    return {
        "score": row.score,
        "handle_count": row.handle_count,
        "kept": row.kept,
        "dropped": row.dropped,
        "path": row.path,
        "measure_ms": row.measure_ms,
    }


def describe_file(large_file: LargeFile) -> dict:
    """A large file's metadata and the messages and summaries that reference it."""
    conversation_id = large_file.conversation_id
    messages = list(
        Message.objects.filter(conversation_id=conversation_id)
        .filter(_file_ref("file_ids", large_file.pk))
        .order_by("seq")
        .values("id", "seq", "role")[:200]
    )
    summaries = list(
        Summary.objects.filter(conversation_id=conversation_id)
        .filter(_file_ref("file_ids", large_file.pk))
        .order_by("created_at", "id")
        .values("id", "kind", "depth")[:200]
    )
    return {
        "type": "file",
        "id": large_file.pk,
        "conversation_id": conversation_id,
        "file_name": large_file.file_name,
        "mime_type": large_file.mime_type,
        "byte_size": large_file.byte_size,
        "line_count": large_file.line_count,
        "token_count": large_file.token_count,
        "sha256": large_file.sha256,
        "tool_name": large_file.tool_name,
        "created_at": large_file.created_at,
        "exploration_summary": large_file.exploration_summary,
        "referenced_by_messages": messages,
        "referenced_by_summaries": summaries,
    }


def _file_ref(field_name: str, file_id: str) -> Q:
    """JSON list membership that works on both databases: SQLite's JSONField has no
    `contains`, so match the quoted id in the stored text (ids are `file_` + hex, which
    cannot occur inside another id's quotes)."""
    from django.db import connection

    if connection.vendor == "postgresql":
        return Q(**{f"{field_name}__contains": [file_id]})
    return Q(**{f"{field_name}__icontains": f'"{file_id}"'})


def describe_for_user(*, user, item_id: str) -> dict:
    if item_id.startswith("sum_"):
        return describe_summary(summary_get_for_user(user=user, summary_id=item_id))
    if item_id.startswith("file_"):
        large_file = LargeFile.objects.filter(
            pk=item_id, conversation__in=conversations_visible_to(user)
        ).first()
        if large_file is None:
            raise NotFound(f"file {item_id} not found")
        return describe_file(large_file)
    if OUTPUT_ID.match(item_id):
        return describe_tool_output(user=user, output_id=item_id)
    raise NotFound(
        f"{item_id} is neither a summary id (sum_...), a file id (file_...) nor a tool output "
        "id (out_...)"
    )


def describe_tool_output(*, user, output_id: str) -> dict:
    """A tool output the context sent shortened (`compaction.tail_outputs`), whole, as
    stored: `out_<message id>_<part ordinal>`."""
    found = OUTPUT_ID.match(output_id)
    if found is None:
        raise NotFound(f"{output_id} is not a tool output id (out_...)")
    message_id, ordinal = int(found[1]), int(found[2])
    part = (
        MessagePart.objects.filter(
            message_id=message_id,
            ordinal=ordinal,
            message__conversation__in=conversations_visible_to(user),
        )
        .select_related("message")
        .first()
    )
    if part is None or (part.tool_output is None and part.tool_error is None):
        raise NotFound(f"tool output {output_id} not found")
    return {
        "type": "tool_output",
        "id": output_id,
        "conversation_id": part.message.conversation_id,
        "message_seq": part.message.seq,
        "role": part.message.role,
        "tool_name": part.tool_name,
        "tool_call_id": part.tool_call_id,
        "is_error": part.tool_error is not None,
        "content": part.tool_output if part.tool_error is None else part.tool_error,
    }


# ---------------------------------------------------------------------------------------
# expand


@dataclass
class ExpandResult:
    summary_id: str
    depth: int
    summaries: list[dict] = field(default_factory=list)
    messages: list[dict] = field(default_factory=list)
    token_estimate: int = 0
    token_cap: int = 0
    truncated: bool = False
    # What to expand next to read what the cap cut: summary ids (a cut summary, or a leaf
    # none of whose messages fit) and the message ids of a leaf that was cut part way.
    omitted_ids: list = field(default_factory=list)
    omitted_message_count: int = 0

    def as_dict(self) -> dict:
        return {
            "summary_id": self.summary_id,
            "depth": self.depth,
            "summaries": self.summaries,
            "messages": self.messages,
            "token_estimate": self.token_estimate,
            "token_cap": self.token_cap,
            "truncated": self.truncated,
            "omitted_ids": self.omitted_ids,
            "omitted_message_count": self.omitted_message_count,
        }


def validate_expand_args(*, depth: int, token_cap: int) -> None:
    if not 1 <= depth <= MAX_EXPAND_DEPTH:
        raise InvalidInput(f"depth must be from 1 to {MAX_EXPAND_DEPTH}", extra={"field": "depth"})
    if token_cap < 1:
        raise InvalidInput("token_cap must be a positive integer", extra={"field": "token_cap"})


def expand_summary(
    summary: Summary, *, depth: int, include_messages: bool, token_cap: int
) -> ExpandResult:
    """One recursive query: summaries below `summary` down `depth` levels and, if asked,
    the source messages of every leaf reached (a leaf root included), cut at `token_cap`."""
    rows = dag.expand_rows(
        summary.pk, max_level=depth, include_messages=include_messages, token_cap=token_cap
    )
    result = ExpandResult(summary_id=summary.pk, depth=depth, token_cap=token_cap)
    times: dict = {}  # raw created_at -> aware datetime: a batch of messages shares one

    def when(value):
        found = times.get(value)
        if found is None:
            found = times[value] = as_datetime(value)
        return found

    summaries, messages = result.summaries, result.messages
    for (_, _, _, item, summary_id, message_id, kind, depth, role, seq, token_count,
         content, level, created_at) in rows:  # fmt: skip
        if content is None:
            result.truncated = True
            if item == "message":
                result.omitted_ids.append(message_id)
                result.omitted_message_count += 1
            else:
                if summary_id not in result.omitted_ids:
                    result.omitted_ids.append(summary_id)
                if item == "leaf_messages":
                    result.omitted_message_count += seq
            continue
        result.token_estimate += token_count
        if item == "summary":
            summaries.append(
                {
                    "id": summary_id,
                    "kind": kind,
                    "depth": depth,
                    "level": level,
                    "token_count": token_count,
                    "created_at": when(created_at),
                    "content": content,
                }
            )
        else:
            messages.append(
                {
                    "id": message_id,
                    "seq": seq,
                    "role": role,
                    "token_count": token_count,
                    "created_at": when(created_at),
                    "content": content,
                    "from_archive": False,
                }
            )
    _fill_archived(messages)
    return result


def _fill_archived(messages: list[dict]) -> None:
    """Archived messages read back from their segments (docs/retention.md): their rows
    keep an empty content; one query finds their segments, each read once (cached)."""
    empty = [m["id"] for m in messages if m["content"] == ""]
    if not empty:
        return
    contents = archived_contents(empty)
    for message in messages:
        if message["id"] in contents:
            message["content"] = contents[message["id"]]
            message["from_archive"] = True


def expand_for_user(
    *,
    user,
    summary_id: str,
    depth: int = 1,
    include_messages: bool = False,
    token_cap: int | None = None,
) -> ExpandResult:
    """Expand as `user`; no (or a zero) `token_cap` means LCM_MAX_EXPAND_TOKENS."""
    token_cap = token_cap or settings.LCM_MAX_EXPAND_TOKENS
    validate_expand_args(depth=depth, token_cap=token_cap)
    summary = summary_get_for_user(user=user, summary_id=summary_id)
    return expand_summary(
        summary, depth=depth, include_messages=include_messages, token_cap=token_cap
    )
