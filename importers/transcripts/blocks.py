"""Content blocks of the Anthropic Messages API (also what Claude Code writes) to our parts.

| block | part |
|---|---|
| text | text: `text_content` (citations and other keys in `metadata.extra`) |
| thinking | reasoning: `text_content`, `metadata.signature` |
| redacted_thinking | reasoning: `metadata.redacted` (the opaque data) |
| tool_use, server_tool_use | tool: `tool_call_id`, `tool_name`, `tool_input` |
| tool_result | tool: `tool_call_id`, `tool_name` (from its tool_use), `tool_output` (the text), `tool_status` "error" when `is_error`; non-text content (images) kept in `metadata.content` |
| image, document | file: `file_mime`, `file_url` (a URL, or a `data:` URL for base64), `file_name` (title) |
| anything else | text part with no text and the whole block in `metadata.unknown_block` |

Every part records the block type in `metadata.block`, so exporters give the same blocks back.
"""

from __future__ import annotations

import json
from typing import Any

_TEXT_KEYS = {"type", "text"}


def _extra(block: dict, known: set[str]) -> dict:
    return {k: v for k, v in block.items() if k not in known}


def _meta(block_type: str, extra: dict | None = None, **values) -> dict:
    meta: dict[str, Any] = {"block": block_type}
    meta.update({k: v for k, v in values.items() if v is not None})
    if extra:
        meta["extra"] = extra
    return meta


def result_text(content: Any) -> tuple[str, list | None]:
    """The text of a tool result's content, and the content itself when it holds more."""
    if content is None:
        return "", None
    if isinstance(content, str):
        return content, None
    if isinstance(content, list):
        texts = [
            b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"
        ]
        only_text = all(
            isinstance(b, dict) and b.get("type") == "text" and set(b) <= _TEXT_KEYS
            for b in content
        )
        return "\n".join(texts), None if only_text else content
    return json.dumps(content, ensure_ascii=False), content


def _source_url(source: dict) -> str | None:
    kind = source.get("type")
    if kind == "base64":
        return f"data:{source.get('media_type', 'application/octet-stream')};base64,{source.get('data', '')}"
    if kind == "url":
        return source.get("url")
    if kind == "file":
        return f"file-id:{source.get('file_id')}"
    return None


def _text(block: dict, tool_names: dict[str, str]) -> dict | None:
    if not isinstance(block.get("text"), str):
        return None
    return {
        "part_type": "text",
        "text_content": block["text"],
        "metadata": _meta("text", _extra(block, _TEXT_KEYS)),
    }


def _thinking(block: dict, tool_names: dict[str, str]) -> dict:
    return {
        "part_type": "reasoning",
        "text_content": block.get("thinking") or "",
        "metadata": _meta(
            "thinking",
            _extra(block, {"type", "thinking", "signature"}),
            signature=block.get("signature"),
        ),
    }


def _redacted_thinking(block: dict, tool_names: dict[str, str]) -> dict:
    return {
        "part_type": "reasoning",
        "metadata": _meta(
            "redacted_thinking", _extra(block, {"type", "data"}), redacted=block.get("data")
        ),
    }


def _tool_use(block: dict, tool_names: dict[str, str]) -> dict | None:
    if not block.get("id"):
        return None
    tool_names[block["id"]] = block.get("name") or ""
    return {
        "part_type": "tool",
        "tool_call_id": block["id"],
        "tool_name": block.get("name") or "",
        "tool_input": block.get("input") if block.get("input") is not None else {},
        "metadata": _meta(block["type"], _extra(block, {"type", "id", "name", "input"})),
    }


def _tool_result(block: dict, tool_names: dict[str, str]) -> dict | None:
    if not block.get("tool_use_id"):
        return None
    text, rich = result_text(block.get("content"))
    part = {
        "part_type": "tool",
        "tool_call_id": block["tool_use_id"],
        "tool_output": text,
        "metadata": _meta(
            "tool_result",
            _extra(block, {"type", "tool_use_id", "content", "is_error"}),
            content=rich,
            content_is_string=isinstance(block.get("content"), str) or None,
            is_error=block.get("is_error"),
        ),
    }
    name = tool_names.get(block["tool_use_id"])
    if name:
        part["tool_name"] = name
    if block.get("is_error"):
        part["tool_status"] = "error"
    return part


def _file(block: dict, tool_names: dict[str, str]) -> dict | None:
    source = block.get("source")
    if not isinstance(source, dict):
        return None
    part = {
        "part_type": "file",
        "file_mime": source.get("media_type")
        or ("text/plain" if source.get("type") == "text" else None),
        "metadata": _meta(
            block["type"],
            _extra(block, {"type", "source", "title"}),
            source_type=source.get("type"),
        ),
    }
    if source.get("type") == "text":
        part["text_content"] = source.get("data") or ""
    else:
        part["file_url"] = _source_url(source)
    if block.get("title"):
        part["file_name"] = block["title"]
    return {k: v for k, v in part.items() if v is not None}


# A block's `type` -> its part; a handler returns None when the block lacks what its type
# needs (then it is kept whole as an unknown block, like a type not listed here).
_BLOCK_PARTS = {
    "text": _text,
    "thinking": _thinking,
    "redacted_thinking": _redacted_thinking,
    "tool_use": _tool_use,
    "server_tool_use": _tool_use,
    "tool_result": _tool_result,
    "image": _file,
    "document": _file,
}


def block_to_part(block: Any, tool_names: dict[str, str]) -> dict:
    """One content block as a raw part dict (validated later by `parse_part`)."""
    if isinstance(block, str):
        return {"part_type": "text", "text_content": block, "metadata": {"block": "string"}}
    if not isinstance(block, dict):
        return {"part_type": "text", "metadata": {"unknown_block": block}}
    kind = block.get("type")
    handler = _BLOCK_PARTS.get(kind) if isinstance(kind, str) else None  # a list is no key
    part = handler(block, tool_names) if handler else None
    return part if part is not None else {"part_type": "text", "metadata": {"unknown_block": block}}


def blocks_to_parts(content: Any, tool_names: dict[str, str]) -> list[dict]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"part_type": "text", "text_content": content, "metadata": {"block": "string"}}]
    if isinstance(content, list):
        return [block_to_part(block, tool_names) for block in content]
    return [block_to_part(content, tool_names)]


def role_for(role: str, parts: list[dict]) -> str:
    """A user message that only carries tool results is a `tool` message here."""
    if (
        role == "user"
        and parts
        and all(
            p.get("part_type") == "tool" and (p.get("metadata") or {}).get("block") == "tool_result"
            for p in parts
        )
    ):
        return "tool"
    return role
