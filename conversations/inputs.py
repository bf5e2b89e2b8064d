"""Parsing of client message payloads into typed inputs, with one clear error per problem.

Used by the API and by any other caller of `messages_append`, so every path refuses the
same bad input the same way (`InvalidInput` naming the message index and field).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from django.utils.dateparse import parse_datetime

from conversations.models import PartType, Role
from core.api.errors import InvalidInput
from core.api.requests import json_integer

_STR = "string"
_BOOL = "boolean"
_INT = "integer"
_NUM = "number"
_JSON = "any JSON value"
_STR_LIST = "list of strings"
_OBJ = "object"

# Part columns a client may send, with their types and, for short columns, their limits.
PART_FIELDS: dict[str, tuple[str, int | None]] = {
    "text_content": (_STR, None),
    "is_ignored": (_BOOL, None),
    "is_synthetic": (_BOOL, None),
    "tool_call_id": (_STR, 255),
    "tool_name": (_STR, 255),
    "tool_status": (_STR, 64),
    "tool_input": (_JSON, None),
    "tool_output": (_STR, None),
    "tool_error": (_STR, None),
    "tool_title": (_STR, None),
    "patch_hash": (_STR, 255),
    "patch_files": (_STR_LIST, None),
    "file_mime": (_STR, 255),
    "file_name": (_STR, None),
    "file_url": (_STR, None),
    "subtask_prompt": (_STR, None),
    "subtask_desc": (_STR, None),
    "subtask_agent": (_STR, 255),
    "step_reason": (_STR, None),
    "step_cost": (_NUM, None),
    "step_tokens_in": (_INT, None),
    "step_tokens_out": (_INT, None),
    "snapshot_hash": (_STR, 255),
    "compaction_auto": (_BOOL, None),
    "metadata": (_OBJ, None),
}
MESSAGE_FIELDS = {"role", "content", "parts", "external_id", "created_at"}
MAX_PARTS_PER_MESSAGE = 1000
# Column ranges (PostgreSQL integer and numeric(20, 8)): a value outside them would fail
# deep in the write as a 500, so it is refused here with the field's name.
INT_MIN, INT_MAX = -(2**31), 2**31 - 1
DECIMAL_LIMIT = Decimal(10) ** 12


@dataclass(frozen=True)
class PartInput:
    part_type: str
    ordinal: int | None
    columns: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class MessageInput:
    role: str
    content: str
    parts: tuple[PartInput, ...] = ()
    external_id: str | None = None
    created_at: datetime | None = None


def _fail(message: str, index: int | None, field_name: str | None) -> InvalidInput:
    extra: dict[str, Any] = {}
    if index is not None:
        extra["index"] = index
        message = f"messages[{index}]: {message}"
    if field_name:
        extra["field"] = field_name
    return InvalidInput(message, extra=extra)


def _check_type(value: Any, kind: str, limit: int | None) -> str | None:
    """Return a complaint when `value` is not of `kind`, else None."""
    if kind == _STR:
        if not isinstance(value, str):
            return "must be a string"
        if limit is not None and len(value) > limit:
            return f"must be at most {limit} characters"
    elif kind == _BOOL and not isinstance(value, bool):
        return "must be true or false"
    elif kind == _INT:
        if json_integer(value) is None:
            return "must be an integer"
        if not INT_MIN <= json_integer(value) <= INT_MAX:
            return f"must be an integer from {INT_MIN} to {INT_MAX}"
    elif kind == _NUM:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            return "must be a number"
        try:
            number = Decimal(str(value))
        except InvalidOperation:
            return "must be a number"
        if not number.is_finite() or abs(number) >= DECIMAL_LIMIT:
            return f"must be a finite number below {DECIMAL_LIMIT:,.0f} in magnitude"
    elif kind == _STR_LIST and not (
        isinstance(value, list) and all(isinstance(v, str) for v in value)
    ):
        return "must be a list of strings"
    elif kind == _OBJ and not isinstance(value, dict):
        return "must be an object"
    return None


def _parse_created_at(raw: Any, index: int | None) -> datetime:
    problem = "created_at must be an ISO 8601 time with a time zone"
    try:
        parsed = parse_datetime(raw) if isinstance(raw, str) else None
    except ValueError:  # well formed but impossible, e.g. 30 February
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise _fail(problem, index, "created_at")
    try:
        parsed.astimezone(UTC)  # stored in UTC: refuse what falls off the calendar there
    except OverflowError:
        raise _fail(f"{problem}, within years 1 to 9999 in UTC", index, "created_at") from None
    return parsed


# The enums' values, once (`Choices.values` builds its list again on every access).
_PART_TYPES = frozenset(PartType.values)
_ROLES = frozenset(Role.values)


def parse_part(raw: Any, index: int | None, part_index: int) -> PartInput:
    where = f"parts[{part_index}]"
    if not isinstance(raw, dict):
        raise _fail(f"{where} must be an object", index, where)
    part_type = raw.get("part_type")
    if not isinstance(part_type, str) or part_type not in _PART_TYPES:
        raise _fail(
            f"{where}.part_type {part_type!r} is not one of: {', '.join(PartType.values)}",
            index,
            f"{where}.part_type",
        )
    ordinal = raw.get("ordinal")
    if ordinal is not None:
        ordinal = json_integer(ordinal) if json_integer(ordinal) is not None else ordinal
    if ordinal is not None and (
        isinstance(ordinal, bool) or not isinstance(ordinal, int) or not 0 <= ordinal <= INT_MAX
    ):
        raise _fail(
            f"{where}.ordinal must be an integer from 0 to {INT_MAX}", index, f"{where}.ordinal"
        )
    columns: dict[str, Any] = {}
    for name, value in raw.items():
        if name in ("part_type", "ordinal"):
            continue
        if name not in PART_FIELDS:
            raise _fail(f"{where}.{name} is not a part field", index, f"{where}.{name}")
        if value is None:
            continue
        kind, limit = PART_FIELDS[name]
        complaint = _check_type(value, kind, limit)
        if complaint:
            raise _fail(f"{where}.{name} {complaint}", index, f"{where}.{name}")
        if kind == _INT:
            value = json_integer(value)  # 5.0 is the integer 5 (JSON Schema 2020-12)
        columns[name] = Decimal(str(value)) if kind == _NUM else value
    return PartInput(part_type=part_type, ordinal=ordinal, columns=columns)


def parse_message(raw: Any, index: int | None = None) -> MessageInput:
    if not isinstance(raw, dict):
        raise _fail("a message must be a JSON object", index, None)
    if "seq" in raw:
        raise _fail("seq is assigned by the server and must not be sent", index, "seq")
    unknown = sorted(set(raw) - MESSAGE_FIELDS)
    if unknown:
        raise _fail(f"unknown field(s): {', '.join(unknown)}", index, unknown[0])
    role = raw.get("role")
    if not isinstance(role, str) or role not in _ROLES:
        raise _fail(f"role {role!r} is not one of: {', '.join(Role.values)}", index, "role")
    content = raw.get("content", "")
    if content is None:
        content = ""
    if not isinstance(content, str):
        raise _fail("content must be a string", index, "content")
    raw_parts = raw.get("parts")
    if raw_parts is None:
        raw_parts = []
    if not isinstance(raw_parts, list):
        raise _fail("parts must be a list", index, "parts")
    if len(raw_parts) > MAX_PARTS_PER_MESSAGE:
        raise _fail(f"at most {MAX_PARTS_PER_MESSAGE} parts per message", index, "parts")
    parts = tuple(parse_part(p, index, i) for i, p in enumerate(raw_parts))
    if not content.strip() and not parts:
        raise _fail("content is empty and there are no parts", index, "content")
    ordinals = [p.ordinal for p in parts if p.ordinal is not None]
    if len(ordinals) != len(set(ordinals)):
        raise _fail("two parts have the same ordinal", index, "parts")
    external_id = raw.get("external_id")
    if external_id is not None:
        complaint = _check_type(external_id, _STR, 255)
        if complaint or not external_id:
            raise _fail(f"external_id {complaint or 'must not be empty'}", index, "external_id")
    created_at = raw.get("created_at")
    if created_at is not None:
        created_at = _parse_created_at(created_at, index)
    return MessageInput(
        role=role, content=content, parts=parts, external_id=external_id, created_at=created_at
    )


def parse_message_payload(payload: Any, *, max_batch: int) -> tuple[list[MessageInput], bool]:
    """Parse one message or `{"messages": [...]}`; returns (inputs, is_batch)."""
    if isinstance(payload, dict) and "messages" in payload:
        if set(payload) != {"messages"}:
            raise InvalidInput(
                "a batch body has only the key 'messages'", extra={"field": "messages"}
            )
        batch = payload["messages"]
        if not isinstance(batch, list) or not batch:
            raise InvalidInput("messages must be a non-empty list", extra={"field": "messages"})
        if len(batch) > max_batch:
            raise InvalidInput(
                f"a batch carries at most {max_batch} messages, got {len(batch)}",
                extra={"field": "messages", "limit": max_batch},
            )
        # A repeated external_id inside the batch is a re-send, as across calls: the
        # append stores the first and answers the repeats with it (messages_append).
        return [parse_message(raw, index) for index, raw in enumerate(batch)], True
    return [parse_message(payload)], False


def render_parts_text(parts: tuple[PartInput, ...]) -> str:
    """Plain-text extraction of parts: what a reader (and search) should see of them."""
    lines: list[str] = []
    for part in parts:
        c = part.columns
        if part.part_type == PartType.TOOL:
            head = f"[tool {c.get('tool_name', '?')}"
            if c.get("tool_call_id"):
                head += f" {c['tool_call_id']}"
            head += "]"
            if "tool_input" in c:
                head += " " + json.dumps(c["tool_input"], ensure_ascii=False, sort_keys=True)
            lines.append(head)
            for key in ("tool_output", "tool_error"):
                if c.get(key):
                    lines.append(c[key])
        elif part.part_type == PartType.PATCH:
            lines.append("[patch " + ", ".join(c.get("patch_files") or []) + "]")
        elif part.part_type == PartType.FILE:
            lines.append(
                f"[file {c.get('file_name') or ''} {c.get('file_mime') or ''}]".replace("  ", " ")
            )
            if c.get("text_content"):
                lines.append(c["text_content"])
        elif part.part_type == PartType.REASONING:
            continue  # the model's reasoning is kept in parts, not in the message's text
        elif c.get("text_content"):
            lines.append(c["text_content"])
    return "\n".join(lines)
