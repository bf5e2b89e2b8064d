"""Small display helpers for the explorer templates. None of them marks text safe:
their output goes through auto-escaping like everything else."""

from __future__ import annotations

import json
import re

from django import template

register = template.Library()


@register.filter
def pretty_json(value) -> str:
    if value is None:
        return ""
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return str(value)


_FILE_ID = re.compile(r"file_[0-9a-f]{16}")


@register.filter
def is_file_id(value) -> bool:
    """Only well-formed file ids become links; anything else is shown as text."""
    return isinstance(value, str) and _FILE_ID.fullmatch(value) is not None
