"""JSON (and JSON Lines) exploration: shape, keys with value types, array lengths, depth, samples."""

from __future__ import annotations

import json
from typing import Any

from .budget import Outline, clip
from .structure import Scan, render, scan, type_name


class NotJson(ValueError):
    """The content does not parse as JSON or JSON Lines; the message says where."""


def explore_json(content: str) -> str:
    value, lines_mode = _parse(content)
    scanned = scan(value)
    outline = Outline()
    outline.add(_headline(value, scanned, lines_mode))
    render(scanned, outline)
    return outline.text()


def _parse(content: str) -> tuple[Any, bool]:
    try:
        return json.loads(content), False
    except RecursionError as error:
        raise NotJson("nested too deeply to parse") from error
    except json.JSONDecodeError as error:
        if error.msg != "Extra data":
            raise NotJson(f"{error.msg} at line {error.lineno} column {error.colno}") from error
        first_error = error
    records = []
    for line in content.splitlines():
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except (json.JSONDecodeError, RecursionError) as error:
            message = f"{first_error.msg} at line {first_error.lineno} column {first_error.colno}"
            raise NotJson(message) from error
    return records, True


def _headline(value: Any, scanned: Scan, lines_mode: bool) -> str:
    depth = f"nesting depth {scanned.depth}"
    if lines_mode:
        return f"JSON Lines: {len(value):,} records; {depth}."
    if isinstance(value, list):
        return f"JSON: top-level array of {len(value):,} items; {depth}."
    if isinstance(value, dict):
        return f"JSON: top-level object with {len(value):,} keys; {depth}."
    rendered = json.dumps(value, ensure_ascii=False)
    return f"JSON: a single {type_name(value)} value: {clip(rendered, 600)}"
