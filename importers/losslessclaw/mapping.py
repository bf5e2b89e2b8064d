"""Mapping lossless-claw rows onto ours: parts, timestamps, text.

Parts: the source's `message_parts` has the same columns and types as ours (both follow the
spec's table); SQLite stores booleans as 0/1 and JSON as TEXT, converted here. A part type
we do not know is kept as a `text` part with no text and the whole source row in
`metadata.raw` (with `metadata.source_part_type`), never dropped. A tool result whose
`tool_output` the source left empty gets the text of its raw block (kept in
`metadata.raw`), so search finds it.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from django.utils.dateparse import parse_datetime

from conversations.inputs import PartInput
from conversations.models import PartType
from importers.losslessclaw.source import OPTIONAL, json_value

_BOOLEAN = ("is_ignored", "is_synthetic", "compaction_auto")
_JSON = ("tool_input", "patch_files", "metadata")
_INTEGER = ("step_tokens_in", "step_tokens_out")
_PART_TYPES = frozenset(PartType.values)  # enum .values rebuilds its list on every access


def clean_text(value: str) -> str:
    """PostgreSQL text cannot hold NUL; SQLite can. Replace it rather than fail."""
    return value.replace("\x00", "\ufffd") if "\x00" in value else value


def parse_time(raw: Any) -> datetime | None:
    """`2026-11-23 04:47:23` (SQLite's datetime('now'), UTC) or ISO 8601 with a zone."""
    if raw is None or raw == "":
        return None
    if isinstance(raw, int | float):  # epoch milliseconds or seconds
        seconds = raw / 1000 if raw > 10**11 else raw
        return datetime.fromtimestamp(seconds, tz=UTC)
    try:
        parsed = parse_datetime(str(raw).strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed is None:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _raw_result_text(metadata: dict) -> str | None:
    raw = metadata.get("raw")
    if not isinstance(raw, dict):
        return None
    for key in ("content", "output", "result"):
        value = raw.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, list):
            texts = [
                block.get("text")
                for block in value
                if isinstance(block, dict) and isinstance(block.get("text"), str)
            ]
            if texts:
                return "\n".join(texts)
    return None


def _is_tool_result(metadata: dict) -> bool:
    raw_type = str(metadata.get("rawType") or "")
    return metadata.get("originalRole") == "toolResult" or "result" in raw_type.lower()


def map_part(row: sqlite3.Row) -> PartInput:
    part_type = row["part_type"]
    columns: dict[str, Any] = {}
    for name in OPTIONAL["message_parts"]:
        value = row[name]
        if value is None:
            continue
        if name in _BOOLEAN:
            value = bool(value)
        elif name in _JSON:
            value = json_value(value)
            if name == "metadata" and not isinstance(value, dict):
                value = {"value": value}
        elif name in _INTEGER:
            value = int(value)
        elif name == "step_cost":
            try:
                value = Decimal(str(value))
            except InvalidOperation:
                continue
        elif isinstance(value, str):
            value = clean_text(value)
        else:
            value = str(value)
        columns[name] = value
    if part_type not in _PART_TYPES:
        raw = {k: (str(v) if isinstance(v, Decimal) else v) for k, v in columns.items()}
        columns = {"metadata": {"source_part_type": part_type, "raw": raw}}
        part_type = PartType.TEXT
    elif part_type == PartType.TOOL and columns.get("tool_output") is None:
        metadata = columns.get("metadata") or {}
        if _is_tool_result(metadata):
            text = _raw_result_text(metadata)
            if text is not None:
                columns["tool_output"] = clean_text(text)
    return PartInput(part_type=part_type, ordinal=int(row["ordinal"]), columns=columns)


def source_extras(row: sqlite3.Row, names: tuple[str, ...]) -> dict[str, Any]:
    """The non-empty optional columns of a source row, JSON decoded where they hold JSON."""
    extras = {}
    for name in names:
        value = row[name]
        if value is None:
            continue
        if isinstance(value, str) and value[:1] in "[{":
            value = json_value(value)
        extras[name] = value
    return extras


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
