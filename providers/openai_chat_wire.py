"""Our blocks <-> the OpenAI Chat Completions wire (`POST /v1/chat/completions`), the wire
that OpenAI-compatible servers speak (Ollama, vLLM, llama.cpp's server, LM Studio,
OpenRouter and the like).

Input: the system prompt is the first message (`role: system`); user text and images are
one `user` message (a plain string when it is one text block, else `text`/`image_url`
parts); each tool_result is its own `tool` message (`tool_call_id`), placed before the rest
of its user message; an assistant message carries its text as `content` and each tool_use
as one of its `tool_calls`. Reasoning blocks have no place on this wire and are left out;
unknown blocks of another provider are left out too.

Output: `choices[0].message`: `content` -> a text block, `tool_calls` -> tool_use blocks;
`finish_reason` maps to our outcome (see `outcome_for_finish_reason`); `usage` gives
`prompt_tokens`, `completion_tokens` and `prompt_tokens_details.cached_tokens`.
"""

from __future__ import annotations

import json

from providers import blocks as b
from providers.base import usage
from providers.caching import read_cache_usage
from providers.ordering import check_tool_ordering, tool_results_first

PROVIDER = "openai_chat"


# ours -> wire -------------------------------------------------------------------------------


def wire_messages(system: str, messages: list[dict]) -> list[dict]:
    ordered = [tool_results_first(message) for message in messages]
    check_tool_ordering(ordered)
    wire: list[dict] = [{"role": "system", "content": system}] if system else []
    for message in ordered:
        if message["role"] == "user":
            wire.extend(_user_messages(message["blocks"]))
        else:
            wire.append(_assistant_message(message["blocks"]))
    return wire


def _user_messages(blocks: list[dict]) -> list[dict]:
    out: list[dict] = []
    parts: list[dict] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "tool_result":
            text = b.tool_result_text(block)
            if block.get("is_error"):
                text = json.dumps({"is_error": True, "content": text})
            out.append({"role": "tool", "tool_call_id": block["tool_use_id"], "content": text})
        elif kind == "text" and block.get("text"):
            parts.append({"type": "text", "text": block["text"]})
        elif kind == "image":
            parts.append({"type": "image_url", "image_url": {"url": image_url(block)}})
    if parts:
        only_text = len(parts) == 1 and parts[0]["type"] == "text"
        out.append({"role": "user", "content": parts[0]["text"] if only_text else parts})
    return out


def image_url(block: dict) -> str:
    source = block.get("source") or {}
    if source.get("type") == "url" or "url" in source:
        return source.get("url", "")
    media_type = source.get("media_type") or block.get("media_type")
    return f"data:{media_type};base64,{source.get('data', '')}"


def _assistant_message(blocks: list[dict]) -> dict:
    text = "".join(block.get("text", "") for block in blocks if block.get("type") == "text")
    calls = [
        {
            "id": block["id"],
            "type": "function",
            "function": {"name": block["name"], "arguments": json.dumps(block.get("input") or {})},
        }
        for block in blocks
        if block.get("type") == "tool_use"
    ]
    message: dict = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = calls
    return message


def wire_tools(tools: list[dict]) -> list[dict]:
    return [
        {
            "type": "function",
            "function": {
                "name": tool["name"],
                "description": tool.get("description", ""),
                "parameters": tool.get("input_schema") or {"type": "object", "properties": {}},
            },
        }
        for tool in tools
    ]


# wire -> ours -------------------------------------------------------------------------------


def parse_arguments(arguments: str) -> dict:
    try:
        value = json.loads(arguments) if arguments and arguments.strip() else {}
    except json.JSONDecodeError:
        return {"_unparsed_arguments": arguments}
    return value if isinstance(value, dict) else {"_value": value}


def message_blocks(message: dict) -> list[dict]:
    """Our blocks of a Chat Completions assistant `message`."""
    out: list[dict] = []
    content = message.get("content")
    if isinstance(content, str) and content:
        out.append(b.text(content))
    elif isinstance(content, list):  # some servers answer with parts
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                out.append(b.text(part.get("text", "")))
            else:
                out.append(b.unknown(PROVIDER, part))
    if message.get("refusal"):
        out.append(b.unknown(PROVIDER, {"type": "refusal", "refusal": message["refusal"]}))
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        out.append(
            b.tool_use(
                call.get("id") or "",
                function.get("name") or "",
                parse_arguments(function.get("arguments") or ""),
            )
        )
    return out


def outcome_for_finish_reason(reason: str | None) -> tuple[str, str | None, str | None]:
    """(status, reason, code) of a Chat Completions finish reason."""
    if reason == "stop":
        return "completed", "stop", None
    if reason in ("tool_calls", "function_call"):
        return "paused", "tool_use", None
    if reason == "length":
        return "incomplete", "max_tokens", None
    if reason == "content_filter":
        return "failed", "content_filter", "refusal"
    return "incomplete", reason or "no_finish_reason", None


def usage_of(raw_usage: dict | None) -> dict:
    """Our usage of a Chat Completions `usage` object, with the cached prompt tokens."""
    spent = raw_usage or {}
    return usage(
        input_tokens=spent.get("prompt_tokens"),
        output_tokens=spent.get("completion_tokens"),
        **read_cache_usage("openai_chat", spent),
    )
