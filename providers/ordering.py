"""Tool ordering rules, enforced when a request is built (SRD 11.3; the Responses API has
the same needs: every function_call_output answers an earlier function_call).

Every tool_use of an assistant message is answered by a tool_result in the very next
message, a user message, and the tool_result blocks come first in it. `tool_results_first`
moves tool_results to the front of their user message (a safe reordering);
`check_tool_ordering` raises `ToolOrderingError` (a ValueError) naming the message and the
id for anything else.
"""

from __future__ import annotations

from providers import blocks as b
from providers.errors import ToolOrderingError


def tool_results_first(message: dict) -> dict:
    blocks = message.get("blocks", [])
    if message.get("role") != "user":
        return message
    results = [block for block in blocks if block.get("type") == "tool_result"]
    if not results:
        return message
    rest = [block for block in blocks if block.get("type") != "tool_result"]
    return {**message, "blocks": results + rest}


def check_tool_ordering(messages: list[dict]) -> None:
    """Raise ToolOrderingError unless each tool_use is answered in the next (user) message
    and each tool_result answers a tool_use of the message right before it."""
    for position, message in enumerate(messages):
        blocks = message.get("blocks", [])
        if message.get("role") not in b.ROLES:
            raise ToolOrderingError(f"message {position}: role must be user or assistant")
        results = [block["tool_use_id"] for block in blocks if block.get("type") == "tool_result"]
        if results and message["role"] != "user":
            raise ToolOrderingError(
                f"message {position}: tool_result {results[0]} must be in a user message"
            )
        previous = messages[position - 1] if position else None
        asked = (
            [blk["id"] for blk in previous["blocks"] if blk.get("type") == "tool_use"]
            if previous and previous.get("role") == "assistant"
            else []
        )
        for tool_use_id in results:
            if tool_use_id not in asked:
                raise ToolOrderingError(
                    f"message {position}: tool_result {tool_use_id} does not answer a "
                    "tool_use of the message right before it"
                )
        if asked:
            missing = [tool_use_id for tool_use_id in asked if tool_use_id not in results]
            if missing:
                raise ToolOrderingError(
                    f"message {position - 1}: tool_use {missing[0]} has no tool_result in the "
                    "next message"
                )
    if messages and messages[-1].get("role") == "assistant":
        pending = [blk["id"] for blk in messages[-1]["blocks"] if blk.get("type") == "tool_use"]
        if pending:
            raise ToolOrderingError(
                f"message {len(messages) - 1}: tool_use {pending[0]} has no tool_result in "
                "the next message"
            )
