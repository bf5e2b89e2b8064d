"""Strict readers for JSON tool inputs and request bodies: a wrong type is a clear 400
naming the field, never a 500."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.utils.dateparse import parse_datetime

from core.api.errors import InvalidInput

_MISSING = object()


def _bad(field: str, expected: str) -> InvalidInput:
    return InvalidInput(f"{field} must be {expected}", extra={"field": field})


def req_str(data: dict, field: str) -> str:
    value = data.get(field)
    if not isinstance(value, str) or not value.strip():
        raise _bad(field, "a non-empty string")
    return value


def opt_str(data: dict, field: str, default: Any) -> Any:
    value = data.get(field, _MISSING)
    if value is _MISSING or value is None:
        return default
    if not isinstance(value, str):
        raise _bad(field, "a string")
    return value


def opt_int(data: dict, field: str, default: Any) -> Any:
    value = data.get(field, _MISSING)
    if value is _MISSING or value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad(field, "an integer")
    return value


def opt_bool(data: dict, field: str, default: bool) -> bool:
    value = data.get(field, _MISSING)
    if value is _MISSING or value is None:
        return default
    if not isinstance(value, bool):
        raise _bad(field, "true or false")
    return value


def opt_str_list(data: dict, field: str) -> list[str] | None:
    value = data.get(field, _MISSING)
    if value is _MISSING or value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise _bad(field, "a list of non-empty strings")
    return value


def opt_datetime(data: dict, field: str) -> dt.datetime | None:
    value = data.get(field, _MISSING)
    if value is _MISSING or value is None:
        return None
    try:
        parsed = parse_datetime(value) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise _bad(field, "an ISO 8601 time with a time zone")
    return parsed
