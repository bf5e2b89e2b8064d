"""Our blocks <-> OpenAI Responses input and output items.

Input: the system prompt goes in `instructions`; user text and images become a `message`
item with `input_text`/`input_image` parts; each tool_result becomes a
`function_call_output` item with the matching `call_id`, placed before the rest of its
user message; assistant text becomes a `message` with `output_text`, each tool_use a
`function_call` item, OpenAI reasoning items go back as they came (with their
`encrypted_content`), and other providers' reasoning or unknown blocks are left out.

Output: the typed `output` array, item by item: `message` -> text blocks (and an
assistant_message transcript item), calls (function, custom, local shell) -> a tool_use
block and a tool_call item, `reasoning` -> a reasoning block and item, anything else kept
raw as unknown (providers/openai_items.py maps each item type).
"""

from __future__ import annotations

import json

from providers import blocks as b
from providers.base import ProviderResponse, outcome, usage
from providers.caching import read_cache_usage
from providers.calls import scrub
from providers.config import ModelSpec
from providers.openai_items import PROVIDER, item_blocks, parse_arguments
from providers.ordering import check_tool_ordering, tool_results_first

__all__ = ["PROVIDER", "convert_output", "parse_arguments", "wire_input", "wire_tools"]


# ours -> wire -------------------------------------------------------------------------------


def wire_input(messages: list[dict]) -> list[dict]:
    ordered = [tool_results_first(message) for message in messages]
    check_tool_ordering(ordered)
    items: list[dict] = []
    for message in ordered:
        if message["role"] == "user":
            items.extend(_user_items(message["blocks"]))
        else:
            items.extend(_assistant_items(message["blocks"]))
    return items


def _user_items(blocks: list[dict]) -> list[dict]:
    items, parts = [], []
    for block in blocks:
        kind = block.get("type")
        if kind == "tool_result" and block.get("raw_item"):
            items.append(block["raw_item"])
        elif kind == "tool_result":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": block["tool_use_id"],
                    "output": _tool_output(block),
                }
            )
        elif kind == "text" and block.get("text"):
            parts.append({"type": "input_text", "text": block["text"]})
        elif kind == "image":
            parts.append({"type": "input_image", "image_url": _image_url(block), "detail": "auto"})
        elif kind == "unknown" and block.get("provider") == PROVIDER:
            parts.append(block["raw"])
    if parts:
        items.append({"type": "message", "role": "user", "content": parts})
    return items


def _tool_output(block: dict) -> str:
    text = b.tool_result_text(block)
    if block.get("is_error"):
        return json.dumps({"is_error": True, "content": text})
    return text


def _image_url(block: dict) -> str:
    source = block.get("source") or {}
    if source.get("type") == "url" or "url" in source:
        return source.get("url", "")
    return f"data:{source.get('media_type') or block.get('media_type')};base64,{source.get('data', '')}"


def _assistant_items(blocks: list[dict]) -> list[dict]:
    items: list[dict] = []
    texts: list[dict] = []

    def flush() -> None:
        if texts:
            items.append({"type": "message", "role": "assistant", "content": list(texts)})
            texts.clear()

    for block in blocks:
        kind = block.get("type")
        if kind == "text" and block.get("text"):
            texts.append(
                {
                    "type": "output_text",
                    "text": block["text"],
                    "annotations": [],  # output metadata, maybe another provider's
                }
            )
            continue
        flush()
        if block.get("raw_item"):  # a custom or local shell call, sent back as it came
            items.append(block["raw_item"])
        elif kind == "tool_use":
            items.append(
                {
                    "type": "function_call",
                    "call_id": block["id"],
                    "name": block["name"],
                    "arguments": json.dumps(block.get("input") or {}),
                }
            )
        elif _ours_to_return(block):
            items.append(block["raw"])
    flush()
    return items


def _ours_to_return(block: dict) -> bool:
    """An OpenAI reasoning item or unknown item, which goes back exactly as it came."""
    if block.get("type") == "reasoning":
        return (block.get("raw") or {}).get("type") == "reasoning"
    return block.get("type") == "unknown" and block.get("provider") == PROVIDER


def wire_tools(tools: list[dict]) -> list[dict]:
    return [
        {
            "type": "function",
            "name": tool["name"],
            "description": tool.get("description", ""),
            "parameters": tool.get("input_schema") or {"type": "object", "properties": {}},
            "strict": False,
        }
        for tool in tools
    ]


# wire -> ours -------------------------------------------------------------------------------


def convert_output(output: list[dict]) -> tuple[list[dict], list[dict]]:
    """(blocks, transcript items) of a Responses `output` array."""
    blocks: list[dict] = []
    items: list[dict] = []
    for item in output:
        kind = item.get("type")
        if kind == "message":
            content = [_content_block(part) for part in item.get("content") or []]
            blocks.extend(content)
            items.append(b.item_assistant_message(content))
            continue
        _, made = item_blocks(item)
        blocks.extend(made)
        for block in made:
            if block["type"] == "tool_use":
                items.append(b.item_tool_call(block["id"], block["name"], block["input"]))
            elif block["type"] == "reasoning":
                items.append(b.item_reasoning(item.get("encrypted_content"), item))
            else:
                items.append(b.item_unknown(PROVIDER, item))
    return blocks, items


def _content_block(part: dict) -> dict:
    if part.get("type") == "output_text":
        return b.text(part.get("text", ""), part.get("annotations") or [])
    return b.unknown(PROVIDER, part)  # refusal parts and future types, kept whole


def outcome_fields(
    response: dict, blocks: list[dict]
) -> tuple[str, str | None, str | None, str | None]:
    """(status, reason, code, message) of a final Responses object."""
    status = response.get("status")
    if status == "completed":
        if any(block["type"] == "tool_use" for block in blocks):
            return "paused", "tool_use", None, None
        return "completed", "completed", None, None
    if status == "incomplete":
        details = response.get("incomplete_details") or {}
        return "incomplete", details.get("reason") or "incomplete", None, None
    if status == "failed":
        error = response.get("error") or {}
        return "failed", "failed", str(error.get("code") or "failed"), error.get("message")
    if status == "cancelled":
        return "cancelled", "cancelled", None, None
    return "incomplete", str(status or "unknown_status"), None, None


def response_from_object(
    spec: ModelSpec, raw_request: dict, raw: dict, secrets: tuple[str, ...] = ()
) -> ProviderResponse:
    blocks, items = convert_output(raw.get("output") or [])
    status, reason, code, message = outcome_fields(raw, blocks)
    spent = raw.get("usage") or {}
    return ProviderResponse(
        raw_request=raw_request,
        raw_response=raw,
        blocks=blocks,
        items=items,
        outcome=outcome(status, reason, code, scrub(message, secrets) if message else None),
        usage=usage(
            spent.get("input_tokens"),
            spent.get("output_tokens"),
            **read_cache_usage(PROVIDER, spent),
        ),
        model=raw.get("model") or spec.model_id,
    )
