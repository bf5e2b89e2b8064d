"""Anthropic Messages arrays: `[{"role", "content"}, ...]`, or a request-shaped object
`{"system": ..., "messages": [...]}` (what `lcm_export --format anthropic` writes).

`content` is a string or content blocks (see `blocks.py`). A user message of tool results
only becomes a `tool` message. The top-level `system` (a string or text blocks) becomes a
first `system` message. Optional per-message `created_at` / `id` keys (not part of the API,
written by our exporter) give the time and the external id; otherwise the external id is
`anthropic:<item number>`, so a re-import adds nothing.
"""

from __future__ import annotations

from typing import Any

from importers.transcripts.blocks import blocks_to_parts, role_for
from importers.transcripts.common import Parsed, ParsedConversation

_ROLES = {"user", "assistant"}


def items_of(document: Any, key: str) -> tuple[list, Any]:
    if isinstance(document, list):
        return document, None
    if isinstance(document, dict) and isinstance(document.get(key), list):
        return document[key], document
    return [], None


def parse(document: Any, *, session_id: str) -> Parsed:
    parsed = Parsed()
    items, envelope = items_of(document, "messages")
    if not items:
        parsed.error(None, "expected a JSON array of messages or an object with 'messages'")
        return parsed
    conversation = ParsedConversation(session_id=session_id)
    tool_names: dict[str, str] = {}
    system = envelope.get("system") if envelope else None
    if system:
        parts = blocks_to_parts(system, tool_names)
        conversation.messages.append(
            (0, {"role": "system", "parts": parts, "external_id": "anthropic:system"})
        )
    for number, item in enumerate(items, start=1):
        if not isinstance(item, dict):
            parsed.error(number, "a message must be a JSON object")
            continue
        role = item.get("role")
        if role not in _ROLES and role != "system":
            parsed.error(number, f"role {role!r} is not user or assistant")
            continue
        parts = blocks_to_parts(item.get("content"), tool_names)
        message = {
            "role": role_for(role, parts),
            "parts": parts,
            "external_id": str(item.get("id") or f"anthropic:{number}"),
        }
        if item.get("created_at"):
            message["created_at"] = item["created_at"]
        conversation.messages.append((number, message))
    parsed.add(conversation)
    return parsed
