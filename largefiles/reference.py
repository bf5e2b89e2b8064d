"""The compact reference that replaces an intercepted file block or tool output.

    [LCM File: file_abc123def4567890 | paper.pdf | application/pdf | 42,150 bytes]

    Exploration Summary:
    <summary>

The header fields are made safe for the one-line format: control characters and newlines become
spaces, `|` becomes `¦`, `[`/`]` become `(`/`)`, and long values are cut with `…`. The summary
never contains a `<file` or `</file` tag (they are written `&lt;file`), so a rewritten message
holds no block that a later parse could intercept again.
"""

from __future__ import annotations

import re
import secrets

FILE_ID_PATTERN = re.compile(r"\bfile_[0-9a-f]{16}\b")

_MAX_FIELD_CHARS = 200
_UNSAFE = str.maketrans({"|": "¦", "[": "(", "]": ")"})
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u0085\u2028\u2029]+")
_TAG = re.compile(r"<(/?)file")


def new_file_id() -> str:
    """`file_` and 16 lower-case hex digits from a cryptographic random source."""
    return f"file_{secrets.token_hex(8)}"


def find_file_ids(text: str) -> list[str]:
    """The distinct file ids mentioned in `text`, in order of first mention."""
    return list(dict.fromkeys(FILE_ID_PATTERN.findall(text)))


def format_file_reference(
    *, file_id: str, name: str | None, mime_type: str, byte_size: int, summary: str
) -> str:
    return _format("LCM File", file_id, name or "unnamed", mime_type, byte_size, summary)


def format_tool_output_reference(
    *, file_id: str, tool_name: str | None, mime_type: str, byte_size: int, summary: str
) -> str:
    return _format("LCM Tool Output", file_id, tool_name or "tool", mime_type, byte_size, summary)


def _format(label: str, file_id: str, title: str, mime: str, byte_size: int, summary: str) -> str:
    header = (
        f"[{label}: {file_id} | {safe_field(title)} | {safe_field(mime)} | {byte_size:,} bytes]"
    )
    body = _TAG.sub(r"&lt;\1file", summary.strip())
    return f"{header}\n\nExploration Summary:\n{body}"


def safe_field(value: str) -> str:
    """`value` made fit for one `|`-separated field of the reference line."""
    cleaned = " ".join(_CONTROL.sub(" ", value).translate(_UNSAFE).split())
    if len(cleaned) > _MAX_FIELD_CHARS:
        cleaned = cleaned[: _MAX_FIELD_CHARS - 1] + "…"
    return cleaned or "unnamed"
