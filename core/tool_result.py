"""The one result of a tool call, whichever wire carries it.

Every tool family builds a `ToolResult`: the retrieval tools (`retrieval.tools`), the turn
engine's registry (`memory.tools`), the drop-in's memory tools (`dropin.tools`) and the MCP
server's tools (`mcpserver.tools`). Each wire reads what it needs from it:

- MCP: one `TextContent` of `text`, and `isError` from `is_error`;
- a model's `tool_result` block: `content` (text, or content blocks a registered tool
  returned) and `is_error`;
- `POST /api/v1/tools/call/`: `as_dict()`.

Structured content is JSON text written by `to_json`, so the bytes a model or a client
reads are the same on every wire.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder

from core.api.errors import LcmError


def to_json(value: Any) -> str:
    """JSON text as tool results carry it: Django's encoder (datetimes, decimals, UUIDs)
    and non-ASCII text kept as it is (fewer tokens for the model than \\u escapes)."""
    return json.dumps(value, cls=DjangoJSONEncoder, ensure_ascii=False)


@dataclass(frozen=True)
class ToolResult:
    # Text (often JSON) or, from a registered tool that returns them, content blocks.
    content: str | list[dict]
    is_error: bool = False

    @classmethod
    def from_data(cls, value: Any) -> ToolResult:
        """A successful result carrying `value` as JSON text."""
        return cls(to_json(value))

    @classmethod
    def from_error(cls, error: LcmError) -> ToolResult:
        """An error result carrying the API's error shape as JSON text."""
        return cls(to_json(error.as_dict()), is_error=True)

    @classmethod
    def error(cls, message: str) -> ToolResult:
        """An error result of plain text, for the model to read."""
        return cls(message, is_error=True)

    @property
    def text(self) -> str:
        """The content as one text, for wires that carry only text (MCP, the drop-in)."""
        return self.content if isinstance(self.content, str) else to_json(self.content)

    def as_dict(self) -> dict[str, Any]:
        return {"content": self.content, "is_error": self.is_error}
