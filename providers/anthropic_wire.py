"""Our blocks <-> Anthropic Messages content blocks, and the Messages API's tool ordering
rules, enforced when a request is built.

Ordering (SRD 11.3) is enforced by providers/ordering.py before anything is sent.

A user message or tool result that is exactly one plain text block is sent as a string,
the shape most clients (and our earlier integration) send.
"""

from __future__ import annotations

from providers import blocks as b
from providers.ordering import check_tool_ordering, tool_results_first

PROVIDER = "anthropic"


# ours -> wire -------------------------------------------------------------------------------


def wire_messages(messages: list[dict]) -> list[dict]:
    ordered = [tool_results_first(message) for message in messages]
    check_tool_ordering(ordered)
    wire = []
    for message in ordered:
        content = [c for c in (_wire_block(block) for block in message["blocks"]) if c]
        wire.append({"role": message["role"], "content": _compact(content)})
    return wire


def _compact(content: list[dict]) -> str | list[dict]:
    if len(content) == 1 and content[0]["type"] == "text" and set(content[0]) == {"type", "text"}:
        return content[0]["text"]
    return content


def _wire_block(block: dict) -> dict | None:
    kind = block.get("type")
    if kind == "text":
        if not block.get("text"):
            return None  # the API refuses empty text blocks
        # Citations are output metadata (and may be another provider's): not sent back.
        return {"type": "text", "text": block["text"]}
    if kind == "tool_use":
        return {
            "type": "tool_use",
            "id": block["id"],
            "name": block["name"],
            "input": block.get("input") or {},
        }
    if kind == "tool_result":
        inner = [c for c in (_wire_block(x) for x in block.get("content") or []) if c]
        out = {"type": "tool_result", "tool_use_id": block["tool_use_id"]}
        out["content"] = _compact(inner) if inner else ""
        if block.get("is_error"):
            out["is_error"] = True
        return out
    if kind == "image":
        source = dict(block.get("source") or {})
        if source.get("type", "base64") == "base64":
            source.setdefault("type", "base64")
            source.setdefault("media_type", block.get("media_type"))
        return {"type": "image", "source": source}
    if kind == "reasoning":
        raw = block.get("raw") or {}
        if raw.get("type") in ("thinking", "redacted_thinking"):
            return raw  # Anthropic's own thinking goes back as it came (tool loops need it)
        return None  # another provider's reasoning means nothing here
    if kind == "unknown" and block.get("provider") == PROVIDER:
        return block.get("raw")
    return None


def wire_tools(tools: list[dict]) -> list[dict]:
    return [
        {
            "name": tool["name"],
            "description": tool.get("description", ""),
            "input_schema": tool.get("input_schema") or {"type": "object", "properties": {}},
        }
        for tool in tools
    ]


# wire -> ours -------------------------------------------------------------------------------


def our_block(block: dict) -> dict:
    kind = block.get("type")
    if kind == "text":
        return b.text(block.get("text", ""), block.get("citations") or [])
    if kind == "tool_use":
        return b.tool_use(block["id"], block["name"], block.get("input"))
    if kind == "thinking":
        return b.reasoning(None, block.get("thinking"), block)
    if kind == "redacted_thinking":
        return b.reasoning(block.get("data"), None, block)
    return b.unknown(PROVIDER, block)


def outcome_for_stop_reason(stop_reason: str | None) -> tuple[str, str | None, str | None]:
    """(status, reason, code) of a Messages API stop reason."""
    if stop_reason in ("end_turn", "stop_sequence"):
        return "completed", stop_reason, None
    if stop_reason in ("max_tokens", "model_context_window_exceeded"):
        return "incomplete", stop_reason, None
    if stop_reason in ("tool_use", "pause_turn"):
        return "paused", stop_reason, None
    if stop_reason == "refusal":
        return "failed", stop_reason, "refusal"
    return "incomplete", stop_reason or "no_stop_reason", None
