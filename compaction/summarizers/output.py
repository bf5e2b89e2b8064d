"""Turning a model response into summary text: only `text` blocks, no inline reasoning,
no wrapper tags, and a closing "Expand for details about:" line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from compaction.summarizers.markers import EXPAND_PREFIX

_REASONING_TAGS = r"thinking|think|analysis|reasoning|reflection|scratchpad|antthinking|thought"
# A closed reasoning element anywhere.
_CLOSED = re.compile(rf"<({_REASONING_TAGS})\b[^>]*>.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
# An opening tag never closed: everything after it is reasoning.
_UNCLOSED = re.compile(rf"<(?:{_REASONING_TAGS})\b[^>]*>.*\Z", re.IGNORECASE | re.DOTALL)
# A closing tag never opened (the model began inside its reasoning): everything before it.
_ORPHAN_CLOSE = re.compile(rf"\A.*</(?:{_REASONING_TAGS})\s*>", re.IGNORECASE | re.DOTALL)
_BLANK_LINES = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)+")  # left where reasoning was cut out
_WRAPPER = re.compile(r"\A<(summary|content)\b[^>]*>\s*(.*?)\s*</\1>\Z", re.IGNORECASE | re.DOTALL)
_EXPAND_LINE = re.compile(rf"^[\s*_#>-]*{re.escape(EXPAND_PREFIX)}[*_]*\s*(.*)$", re.IGNORECASE)


def response_text(blocks: Iterable[Any]) -> str:
    """The text of the `text` blocks (our block dicts or SDK objects); reasoning,
    `tool_use` and any other block types are ignored."""
    return "\n".join(_field(block, "text") for block in blocks if _field(block, "type") == "text")


def _field(block: Any, name: str) -> Any:
    return block.get(name) if isinstance(block, dict) else getattr(block, name, None)


def strip_reasoning(text: str) -> str:
    """Remove reasoning the model wrote inline, and an outer <summary>/<content> wrapper."""
    text = _CLOSED.sub("", text)
    text = _UNCLOSED.sub("", text)
    text = _ORPHAN_CLOSE.sub("", text)
    text = _BLANK_LINES.sub("\n\n", text).strip()
    wrapped = _WRAPPER.match(text)
    return wrapped.group(2) if wrapped else text


def split_expand_line(text: str) -> tuple[str, str | None]:
    """The summary body and what its "Expand for details about:" line names (None when the
    model wrote none). Every such line is taken out of the body wherever the model put it;
    markdown emphasis around the prefix is dropped; the last non-empty one wins."""
    body, named = [], None
    for line in text.splitlines():
        match = _EXPAND_LINE.match(line)
        if match:
            named = match.group(1).strip().strip("*_ ") or named
        else:
            body.append(line)
    return "\n".join(body).strip(), named


def join_expand_line(body: str, named: str) -> str:
    return f"{body}\n{EXPAND_PREFIX} {named}"
