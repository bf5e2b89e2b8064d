"""Small display helpers for the explorer templates. Only `marked_snippet` marks text
safe, and it escapes every character of the text itself; the rest go through
auto-escaping like everything else."""

from __future__ import annotations

import json
import re

from django import template
from django.utils.html import escape
from django.utils.safestring import mark_safe

register = template.Library()


@register.filter
def pretty_json(value) -> str:
    if value is None:
        return ""
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return str(value)


# Terminal control sequences (colours, cursor moves, window titles) in hook and shell output:
# CSI, OSC (ended by BEL or ST) and the two-character escapes, and stray BEL/BS characters.
_TERMINAL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]|[\x07\x08]"
)


@register.filter
def plain_terminal(value) -> str:
    """Text as a terminal would show it, without the escape codes that colour it."""
    if not isinstance(value, str):
        return value
    return _TERMINAL.sub("", value) if "\x1b" in value or "\x07" in value else value


_FILE_ID = re.compile(r"file_[0-9a-f]{16}")


@register.filter
def is_file_id(value) -> bool:
    """Only well-formed file ids become links; anything else is shown as text."""
    return isinstance(value, str) and _FILE_ID.fullmatch(value) is not None


@register.filter
def marked_snippet(value) -> str:
    """A search snippet as HTML: each «…» pair becomes <mark>…</mark> and every other
    character is escaped. Unpaired markers (the content itself holds a « or ») are shown
    as text, escaped like the rest."""
    from conversations.search.text import split_marks

    text = value if isinstance(value, str) else ""
    parsed = split_marks(text)
    if parsed is None:
        return escape(text)
    plain, spans = parsed
    out, at = [], 0
    for start, end in spans:
        out += [escape(plain[at:start]), "<mark>", escape(plain[start:end]), "</mark>"]
        at = end
    out.append(escape(plain[at:]))
    # Safe: built only from escaped text and the literal <mark> tags above.
    return mark_safe("".join(out))  # noqa: S308
