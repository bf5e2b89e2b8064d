"""Generic JSONL: one message per line.

A line in our own message shape (`role`, `content`, `parts`, `external_id`, `created_at`:
what `lcm_export --format jsonl` writes and `POST .../messages/` accepts) is taken as it
is, so an export imports back unchanged. Any other object with a `role` is read
leniently: `content` as a string or Anthropic-style content blocks, the time from
`created_at` or `timestamp`, the external id from `external_id`, `id` or `uuid`; roles
`human` and `ai`/`model` are read as user and assistant. Without an id, the external id is
`jsonl:line:<n>`.
"""

from __future__ import annotations

from importers.transcripts.blocks import blocks_to_parts, role_for
from importers.transcripts.common import Line, Parsed, ParsedConversation

_OWN = {"role", "content", "parts", "external_id", "created_at"}
_ROLE_ALIASES = {"human": "user", "ai": "assistant", "model": "assistant", "developer": "system"}


def parse(lines: list[Line], *, session_id: str) -> Parsed:
    parsed = Parsed()
    conversation = ParsedConversation(session_id=session_id)
    tool_names: dict[str, str] = {}
    for line in lines:
        item = line.value
        if not isinstance(item, dict):
            parsed.error(line.number, "a line must hold a JSON object")
            continue
        if set(item) <= _OWN and ("parts" in item or isinstance(item.get("content"), str)):
            message = dict(item)
        else:
            role = item.get("role")
            role = _ROLE_ALIASES.get(role, role)
            parts = blocks_to_parts(item.get("content"), tool_names)
            message = {
                "role": role_for(role, parts) if isinstance(role, str) else role,
                "parts": parts,
            }
            when = item.get("created_at") or item.get("timestamp")
            if when is not None:
                message["created_at"] = when
            ident = item.get("external_id") or item.get("id") or item.get("uuid")
            if ident is not None:
                message["external_id"] = str(ident)
        message.setdefault("external_id", f"jsonl:line:{line.number}")
        conversation.messages.append((line.number, message))
    parsed.add(conversation)
    return parsed
