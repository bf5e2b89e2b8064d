"""The `lcm_receipt` MCP tool (docs/receipts.md): what a model call was sent and why, its
exact replay, its diff against another call, or a conversation's calls."""

from __future__ import annotations

import json

from conversations.selectors import conversation_get_for_user
from core.api.errors import InvalidInput, LcmError
from core.tool_result import ToolResult
from mcpserver.mcp_tool import McpTool
from receipts import selectors
from receipts.diff import receipt_diff

DESCRIPTION = (
    "Receipts of model calls: what exactly a call sent and why. action `list` with "
    "conversation_id: that conversation's calls (tokens in/out, cache reads, cost, latency). "
    "`show` with receipt_id: every item sent (kind, id, tokens, why it was there), budget, "
    "what was left out, what came back. `replay`: the exact request body sent upstream. "
    "`diff` (optional against): items added, dropped, summarized, moved and where the cached "
    "prefix broke, against the previous call by default."
)
SCHEMA = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": ["list", "show", "replay", "diff"]},
        "receipt_id": {"type": "string", "description": "show, replay, diff: the receipt."},
        "conversation_id": {
            "type": "integer",
            "minimum": 1,
            "description": "list: the conversation.",
        },
        "against": {"type": "string", "description": "diff: the other receipt."},
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": 500,
            "description": "list: newest N (default 50).",
        },
    },
    "required": ["action"],
    "additionalProperties": False,
}


def _run(*, user, arguments: dict) -> ToolResult:
    try:
        return ToolResult.from_data(_answer(user, arguments))
    except LcmError as error:
        return ToolResult.from_error(error)


def _answer(user, arguments: dict):
    action = arguments.get("action")
    if action == "list":
        conversation_id = arguments.get("conversation_id")
        if not isinstance(conversation_id, int) or isinstance(conversation_id, bool):
            raise InvalidInput("list needs conversation_id (an integer)")
        conversation_get_for_user(user=user, conversation_id=conversation_id)
        limit = arguments.get("limit", 50)
        if not isinstance(limit, int) or not 1 <= limit <= 500:
            raise InvalidInput("limit must be an integer from 1 to 500")
        rows = selectors.receipts_of_conversation(conversation_id=conversation_id).reverse()[:limit]
        return [
            {
                "id": r.id,
                "site": r.site,
                "model": r.model,
                "input_tokens": r.input_tokens,
                "output_tokens": r.output_tokens,
                "cache_read_tokens": r.cache_read_tokens,
                "cost_usd": r.cost_usd,
                "latency_ms": r.latency_ms,
            }
            for r in reversed(list(rows))
        ]
    if action not in ("show", "replay", "diff"):
        raise InvalidInput("action must be list, show, replay or diff")
    receipt_id = arguments.get("receipt_id")
    if not isinstance(receipt_id, str) or not receipt_id:
        raise InvalidInput(f"{action} needs receipt_id")
    receipt = selectors.receipt_get_for_user(user=user, receipt_id=receipt_id)
    if action == "show":
        return json.loads(json.dumps(selectors.receipt_detail(receipt), default=str))
    if action == "replay":
        replay = selectors.replay(receipt)
        return {"exact": replay.exact, "note": replay.note, "body": json.loads(replay.body)}
    other = arguments.get("against")
    against = (
        selectors.receipt_get_for_user(user=user, receipt_id=other)
        if isinstance(other, str) and other
        else selectors.receipt_previous(receipt)
    )
    if against is None:
        raise InvalidInput("this is the conversation's first call: name one with against")
    return receipt_diff(receipt, against)


def receipt_tools() -> list[McpTool]:
    return [McpTool("lcm_receipt", DESCRIPTION, SCHEMA, _run)]
