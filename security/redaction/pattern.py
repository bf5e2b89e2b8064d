"""What a redaction's regex must meet beyond its JSON Schema: it compiles in the `regex`
package's dialect, cannot match the empty string, and cannot match the marker it leaves
(or verify would always find it again). No Django import: the API contract test's
schemathesis hooks (tests/contract/st_hooks.py) read the same rules."""

from __future__ import annotations

import regex

MARKER_EXAMPLE = "[redacted: reason red_0123456789abcdef]"


def regex_problem(pattern: str) -> str | None:
    """Why `pattern` cannot be a redaction's regex, or None."""
    try:
        compiled = regex.compile(pattern)
    except regex.error as error:
        return f"regex does not compile: {error}"
    if compiled.search(""):
        return "regex matches the empty string"
    if compiled.search(MARKER_EXAMPLE):
        return "regex matches the redaction marker itself"
    return None
