"""The retrieval tools in Anthropic tool format, and one dispatcher that runs a tool call
as a user (the main agent) or inside a delegation grant (the sub-agent).

The sub-agent gets only `lcm_describe` and `lcm_expand`: never `lcm_expand_query`, so an
expansion cannot spawn another one, and never grep, so it stays inside what the main
agent routed it to.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder

from core.api.errors import InvalidInput, LcmError
from retrieval import selectors, services
from retrieval.grep import MAX_LIMIT, GrepRequest, grep_for_user
from retrieval.models import DelegationGrant
from retrieval.parsing import opt_bool, opt_datetime, opt_int, opt_str, opt_str_list, req_str

LCM_DESCRIBE = {
    "name": "lcm_describe",
    "description": (
        "Look up one id from the compacted history: a summary (sum_...) or a stored large "
        "file (file_...). For a summary you get its kind, depth, time range, the message "
        "seq range it covers, its parent/child summaries and a manifest of everything below "
        "it (how many summaries and messages, how many tokens). Cheap: use it first to "
        "decide whether a summary is worth expanding and how big the expansion would be."
    ),
    "input_schema": {
        "type": "object",
        "properties": {"id": {"type": "string", "description": "A sum_... or file_... id."}},
        "required": ["id"],
    },
}

LCM_GREP = {
    "name": "lcm_grep",
    "description": (
        "Search every stored message and summary of the conversation (including history "
        "that was compacted out of your context) by full text or regex. Each message hit "
        "names `covered_by`: the summary in your context that stands for it, which is what "
        "to expand or delegate. Use it to route: find where something was discussed before "
        "reading anything in depth."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "Words (full_text) or a pattern (regex)."},
            "mode": {"type": "string", "enum": ["full_text", "regex"], "default": "full_text"},
            "scope": {
                "type": "string",
                "enum": ["messages", "summaries", "both", "files"],
                "default": "both",
                "description": "files searches the stored content of large files (file_...).",
            },
            "since": {"type": "string", "description": "ISO 8601 time, inclusive."},
            "before": {"type": "string", "description": "ISO 8601 time, exclusive."},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": 50},
            "sort": {"type": "string", "enum": ["recency", "relevance"], "default": "recency"},
            "ignore_case": {"type": "boolean", "default": False},
            "all_conversations": {
                "type": "boolean",
                "default": False,
                "description": "Search every conversation of the user, not only this one.",
            },
            "include_archived": {
                "type": "boolean",
                "default": False,
                "description": "Also scan old messages whose text retention archived (slower; "
                "their hits say from_archive).",
            },
        },
        "required": ["query"],
    },
}

LCM_EXPAND = {
    "name": "lcm_expand",
    "description": (
        "Read what a summary was made from: its source summaries down `depth` levels and, "
        "with include_messages, the exact original messages. Output is cut at token_cap "
        "(truncated: true and omitted_ids tell what was left out; expand those ids next). "
        "Use directly only for shallow reads of one summary; for multi-hop or broad reads "
        "delegate with lcm_expand_query."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "summary_id": {"type": "string"},
            "depth": {
                "type": "integer",
                "minimum": 1,
                "maximum": selectors.MAX_EXPAND_DEPTH,
                "default": 1,
            },
            "include_messages": {"type": "boolean", "default": False},
            "token_cap": {"type": "integer", "minimum": 1},
        },
        "required": ["summary_id"],
    },
}

LCM_EXPAND_QUERY = {
    "name": "lcm_expand_query",
    "description": (
        "Ask a focused question about compacted history without loading it into your "
        "context: a sub-agent with read-only access to the given summaries (or to what "
        "`query` finds) expands them and answers with the ids it cites. Use it for "
        "multi-hop traversal, broad time ranges, or anything likely to need more than a few "
        "thousand tokens of raw history."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "prompt": {"type": "string", "description": "The question to answer."},
            "summary_ids": {"type": "array", "items": {"type": "string"}},
            "query": {"type": "string", "description": "Find the summaries by full-text search."},
            "max_answer_tokens": {"type": "integer", "minimum": 50},
            "token_cap": {"type": "integer", "minimum": 1},
        },
        "required": ["prompt"],
    },
}

TOOL_DEFINITIONS = [LCM_DESCRIBE, LCM_GREP, LCM_EXPAND, LCM_EXPAND_QUERY]
SUBAGENT_TOOL_DEFINITIONS = [LCM_DESCRIBE, LCM_EXPAND]
TOOL_NAMES = {tool["name"] for tool in TOOL_DEFINITIONS}


@dataclass(frozen=True)
class ToolResult:
    content: str
    is_error: bool = False


def to_json(value: Any) -> str:
    return json.dumps(value, cls=DjangoJSONEncoder, ensure_ascii=False)


def _error(error: LcmError) -> ToolResult:
    return ToolResult(to_json(error.as_dict()), is_error=True)


def _expand_args(data: dict) -> dict:
    return {
        "summary_id": req_str(data, "summary_id"),
        "depth": opt_int(data, "depth", 1),
        "include_messages": opt_bool(data, "include_messages", False),
        "token_cap": opt_int(data, "token_cap", None),
    }


def tool_call_for_user(*, user, name: str, input: dict, conversation_id: int) -> ToolResult:
    """Run one tool call as `user` inside `conversation_id` (checked by the caller).
    Problems with the tool input come back as an error result, as a model expects."""
    if name not in TOOL_NAMES:
        raise InvalidInput(
            f"unknown tool {name!r}; known: {', '.join(sorted(TOOL_NAMES))}",
            extra={"field": "name"},
        )
    if not isinstance(input, dict):
        raise InvalidInput("input must be a JSON object", extra={"field": "input"})
    try:
        if name == "lcm_describe":
            return ToolResult(
                to_json(selectors.describe_for_user(user=user, item_id=req_str(input, "id")))
            )
        if name == "lcm_expand":
            expanded = selectors.expand_for_user(user=user, **_expand_args(input))
            return ToolResult(to_json(expanded.as_dict()))
        if name == "lcm_grep":
            request = GrepRequest(
                query=req_str(input, "query"),
                mode=opt_str(input, "mode", "full_text"),
                scope=opt_str(input, "scope", "both"),
                conversation_id=None
                if opt_bool(input, "all_conversations", False)
                else conversation_id,
                since=opt_datetime(input, "since"),
                before=opt_datetime(input, "before"),
                limit=opt_int(input, "limit", 50),
                sort=opt_str(input, "sort", "recency"),
                ignore_case=opt_bool(input, "ignore_case", False),
                include_archived=opt_bool(input, "include_archived", False),
            )
            return ToolResult(to_json({"results": grep_for_user(user=user, request=request)}))
        from retrieval.expansion import ExpansionRequest, expansion_run

        request = ExpansionRequest(
            prompt=req_str(input, "prompt"),
            summary_ids=opt_str_list(input, "summary_ids"),
            query=opt_str(input, "query", None),
            conversation_id=conversation_id,
            max_answer_tokens=opt_int(input, "max_answer_tokens", None),
            token_cap=opt_int(input, "token_cap", None),
        )
        return ToolResult(to_json(expansion_run(user=user, request=request)))
    except LcmError as error:
        return _error(error)


def tool_call_for_grant(*, grant: DelegationGrant, name: str, input: dict) -> ToolResult:
    """Run one sub-agent tool call inside `grant`; anything else is refused."""
    try:
        if not isinstance(input, dict):
            raise InvalidInput("input must be a JSON object")
        if name == "lcm_describe":
            return ToolResult(
                to_json(services.grant_describe(grant=grant, item_id=req_str(input, "id")))
            )
        if name == "lcm_expand":
            return ToolResult(
                to_json(services.grant_expand(grant=grant, **_expand_args(input)).as_dict())
            )
        raise InvalidInput(
            f"tool {name!r} is not available to an expansion sub-agent; "
            "use lcm_describe or lcm_expand"
        )
    except LcmError as error:
        return _error(error)
