"""JSON parsing that refuses what the database cannot store faithfully.

PostgreSQL text cannot hold NUL and UTF-8 cannot hold a lone surrogate; both would
otherwise surface as a 500 deep in the write. We refuse them at the door with the
path of the offending string.
"""

from __future__ import annotations

import json
import math
from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

# Deeper JSON than this is refused: the database's JSON parser and our own renderer
# would otherwise hit their recursion limits (a 500) on the way in or out.
MAX_JSON_DEPTH = 64


def find_unstorable_text(value: Any, path: str = "$", depth: int = 0) -> str | None:
    """Return a message naming the first string under `value` that cannot be stored."""
    if isinstance(value, str):
        if "\x00" in value:
            return f"{path} contains a NUL character"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return f"{path} contains a lone surrogate (invalid Unicode)"
        return None
    if isinstance(value, dict | list) and depth >= MAX_JSON_DEPTH:
        return f"{path} is nested more than {MAX_JSON_DEPTH} levels deep"
    if isinstance(value, dict):
        for key, item in value.items():
            problem = find_unstorable_text(key, f"{path} key", depth) or find_unstorable_text(
                item, f"{path}.{key}", depth + 1
            )
            if problem:
                return problem
    elif isinstance(value, list):
        for index, item in enumerate(value):
            problem = find_unstorable_text(item, f"{path}[{index}]", depth + 1)
            if problem:
                return problem
    return None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    # 1e400 parses to infinity, which no JSON column or response can hold.
    number = float(text)
    if math.isinf(number):
        raise ValueError(f"number {text} is out of range")
    return number


class StrictJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        parser_context = parser_context or {}
        encoding = parser_context.get("encoding", "utf-8")
        try:
            text = stream.read().decode(encoding) if stream is not None else ""
        except UnicodeDecodeError as exc:
            raise ParseError(f"request body is not valid UTF-8: {exc}") from None
        if not text.strip():
            raise ParseError("request body is empty; a JSON object is expected")
        try:
            data = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
        except ValueError as exc:
            raise ParseError(f"request body is not valid JSON: {exc}") from None
        except RecursionError:
            raise ParseError(
                f"request body is nested more than {MAX_JSON_DEPTH} levels deep"
            ) from None
        problem = find_unstorable_text(data)
        if problem:
            raise ParseError(problem)
        return data
