"""The retrieval tools in Anthropic tool format (name, description, input_schema), and
the parsing of lcm_expand's input that both dispatchers share.

The sub-agent gets only `lcm_describe` and `lcm_expand` (SUBAGENT_TOOL_DEFINITIONS):
never `lcm_expand_query`, so an expansion cannot spawn another one, and never grep, so it
stays inside what the main agent routed it to.

This module is the bottom of the tool modules: `retrieval.tools` (the main agent's
dispatcher), `retrieval.grant_tools` (the sub-agent's) and `retrieval.expansion` import it.
"""

from __future__ import annotations

from retrieval import selectors
from retrieval.grep import MAX_LIMIT
from retrieval.grep_origin import MAX_AGENT_CHARS, MAX_PROJECT_CHARS
from retrieval.parsing import opt_bool, opt_int, req_str

LCM_DESCRIBE = {
    "name": "lcm_describe",
    "description": (
        "Look up one id from the compacted history: a summary (sum_...), a stored large "
        "file (file_...), or a tool output your context shows shortened (out_...: you get "
        "it whole). For a summary you get its kind, depth, time range, the message "
        "seq range it covers, its parent/child summaries and a manifest of everything below "
        "it (how many summaries and messages, how many tokens). Cheap: use it first to "
        "decide whether a summary is worth expanding and how big the expansion would be."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "id": {"type": "string", "description": "A sum_..., file_... or out_... id."}
        },
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
        "reading anything in depth. Each hit's `origin` says where it comes from: the coding "
        "agent, project directory, session and its times; `agent` and `project` search the "
        "sessions of one agent or one project (since/before: a time window)."
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
            "agent": {
                "type": "string",
                "maxLength": MAX_AGENT_CHARS,
                "description": "Only sessions this coding agent wrote: claude-code, codex, "
                "opencode or gemini. Searches every conversation of the user.",
            },
            "project": {
                "type": "string",
                "maxLength": MAX_PROJECT_CHARS,
                "description": "Only sessions run in this project directory or below it "
                "(e.g. /home/me/api). Searches every conversation of the user.",
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


def expand_args(data: dict) -> dict:
    """lcm_expand's input, read strictly (a wrong type is an InvalidInput naming the field)."""
    return {
        "summary_id": req_str(data, "summary_id"),
        "depth": opt_int(data, "depth", 1),
        "include_messages": opt_bool(data, "include_messages", False),
        "token_cap": opt_int(data, "token_cap", None),
    }
