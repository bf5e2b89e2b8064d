"""Provider-neutral content blocks, messages and transcript items (SRD 5.1-5.3).

Everything outside `providers/` sees these JSON dicts, never a provider's wire format:

    {"type": "text", "text": str, "annotations": list}
    {"type": "tool_use", "id": str, "name": str, "input": dict}
    {"type": "tool_result", "tool_use_id": str, "content": [blocks], "is_error": bool}
    {"type": "image", "media_type": str, "source": dict}
    {"type": "reasoning", "encrypted_content": str|None, "summary": str|None, "raw": dict|None}
    {"type": "unknown", "provider": str, "raw": dict}

A message is `{"role", "blocks", "rendered_text"}`; transcript items are `{"kind": ...}`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

BLOCK_TYPES = ("text", "tool_use", "tool_result", "image", "reasoning", "unknown")
ROLES = ("user", "assistant")


def text(value: str, annotations: list | None = None) -> dict:
    return {"type": "text", "text": value, "annotations": list(annotations or [])}


def tool_use(id: str, name: str, input: dict | None) -> dict:
    return {"type": "tool_use", "id": id, "name": name, "input": dict(input or {})}


def tool_result(tool_use_id: str, content: str | list[dict], is_error: bool = False) -> dict:
    blocks = [text(content)] if isinstance(content, str) else list(content)
    return {
        "type": "tool_result",
        "tool_use_id": tool_use_id,
        "content": blocks,
        "is_error": is_error,
    }


def image(media_type: str, source: dict) -> dict:
    return {"type": "image", "media_type": media_type, "source": dict(source)}


def reasoning(
    encrypted_content: str | None = None, summary: str | None = None, raw: dict | None = None
) -> dict:
    return {
        "type": "reasoning",
        "encrypted_content": encrypted_content,
        "summary": summary,
        "raw": raw,
    }


def unknown(provider: str, raw: Any) -> dict:
    return {"type": "unknown", "provider": provider, "raw": raw}


def rendered_text(blocks: Iterable[dict]) -> str:
    """The visible text of a message: its text blocks joined, in order (tool calls, results,
    images and reasoning are not visible text)."""
    return "".join(block.get("text", "") for block in blocks if block.get("type") == "text")


def message(role: str, blocks: str | list[dict]) -> dict:
    """A message in our shape; a plain string is one text block."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
    items = [text(blocks)] if isinstance(blocks, str) else list(blocks)
    return {"role": role, "blocks": items, "rendered_text": rendered_text(items)}


def tool_result_text(block: dict) -> str:
    """The text of a tool_result's content (what a provider that wants a string gets)."""
    return rendered_text(block.get("content") or [])


# Transcript items (SRD 5.3) ----------------------------------------------------------------


def item_assistant_message(blocks: list[dict]) -> dict:
    return {"kind": "assistant_message", "blocks": list(blocks)}


def item_tool_call(call_id: str, name: str, arguments: Any) -> dict:
    return {"kind": "tool_call", "call_id": call_id, "name": name, "arguments": arguments}


def item_tool_output(call_id: str, output: Any) -> dict:
    return {"kind": "tool_output", "call_id": call_id, "output": output}


def item_reasoning(encrypted_content: str | None, raw: dict | None) -> dict:
    return {"kind": "reasoning", "encrypted_content": encrypted_content, "raw": raw}


def item_unknown(provider: str, raw: Any) -> dict:
    return {"kind": "unknown", "provider": provider, "raw": raw}


def items_from_blocks(blocks: list[dict]) -> list[dict]:
    """Transcript items of an assistant message: the message itself, then one tool_call per
    tool_use and one reasoning item per reasoning block (Anthropic and offline, whose output
    is one message; the OpenAI adapter builds items from its typed output instead)."""
    items = [item_assistant_message(blocks)]
    for block in blocks:
        if block["type"] == "tool_use":
            items.append(item_tool_call(block["id"], block["name"], block["input"]))
        elif block["type"] == "reasoning":
            items.append(item_reasoning(block.get("encrypted_content"), block.get("raw")))
    return items
