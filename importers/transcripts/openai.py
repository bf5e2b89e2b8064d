"""OpenAI Chat Completions message arrays and Responses API input arrays (JSON).

Accepted: a JSON array, or an object with `messages` (Chat Completions) or `input`
(Responses). The Responses shape is recognised by item `type`s (`message`,
`function_call`, `function_call_output`, `reasoning`) or `input_text`/`output_text` parts.

| Chat Completions | here |
|---|---|
| system, developer | system message (`metadata.role` keeps "developer") |
| user / assistant `content` (string or parts) | text parts; `image_url` parts as file parts (`file_url`) |
| assistant `tool_calls[]` | tool parts: `tool_call_id`, `tool_name`, `tool_input` (the parsed `arguments`; unparsable arguments kept in `metadata.arguments`) |
| assistant `reasoning_content` | reasoning part |
| tool (`tool_call_id`, `content`) | tool message, tool part with `tool_output` |

| Responses item | here |
|---|---|
| message (role, content parts) | a message of that role with text / file parts |
| function_call | assistant message with one tool part |
| function_call_output | tool message with one tool part |
| reasoning | assistant message with a reasoning part (summary text; `encrypted_content` in metadata) |
| anything else | assistant message with the item kept raw (`metadata.unknown_block`) |

External ids are the item's `id` when it has one, else `openai:<item number>`.
"""

from __future__ import annotations

import json
from typing import Any

from importers.transcripts.anthropic import items_of
from importers.transcripts.common import Parsed, ParsedConversation

_RESPONSES_TYPES = {"message", "function_call", "function_call_output", "reasoning"}
_ROLE = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}


def _is_responses(document: Any, items: list) -> bool:
    if isinstance(document, dict) and "input" in document:
        return True
    for item in items:
        if not isinstance(item, dict):
            continue
        if item.get("type") in _RESPONSES_TYPES:
            return True
        content = item.get("content")
        if isinstance(content, list) and any(
            isinstance(p, dict) and p.get("type") in ("input_text", "output_text") for p in content
        ):
            return True
    return False


def _content_parts(content: Any, kind: str) -> list[dict]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"part_type": "text", "text_content": content, "metadata": {"block": "string"}}]
    if not isinstance(content, list):
        return [{"part_type": "text", "metadata": {"unknown_block": content}}]
    parts = []
    for piece in content:
        ptype = piece.get("type") if isinstance(piece, dict) else None
        if ptype in ("text", "input_text", "output_text", "refusal") and isinstance(
            piece.get("text", piece.get("refusal")), str
        ):
            text = piece.get("text", piece.get("refusal"))
            extra = {k: v for k, v in piece.items() if k not in ("type", "text", "refusal")}
            meta = {"block": ptype}
            if extra:
                meta["extra"] = extra
            parts.append({"part_type": "text", "text_content": text, "metadata": meta})
        elif ptype == "image_url" and isinstance(piece.get("image_url"), dict):
            url = piece["image_url"].get("url")
            parts.append(
                _file_part(url, ptype, {k: v for k, v in piece["image_url"].items() if k != "url"})
            )
        elif ptype == "input_image" and (piece.get("image_url") or piece.get("file_id")):
            url = piece.get("image_url") or f"file-id:{piece['file_id']}"
            parts.append(
                _file_part(
                    url, ptype, {k: v for k, v in piece.items() if k not in ("type", "image_url")}
                )
            )
        else:
            parts.append({"part_type": "text", "metadata": {"unknown_block": piece}})
    return parts


def _file_part(url: str | None, block: str, extra: dict) -> dict:
    mime = None
    if isinstance(url, str) and url.startswith("data:"):
        mime = url[5:].split(";", 1)[0].split(",", 1)[0] or None
    meta: dict = {"block": block}
    if extra:
        meta["extra"] = extra
    part = {"part_type": "file", "file_url": url, "metadata": meta}
    if mime:
        part["file_mime"] = mime
    return part


def _tool_call(call_id: str, name: str, arguments: Any, block: str) -> dict:
    meta: dict = {"block": block}
    tool_input: Any = arguments
    if isinstance(arguments, str):
        try:
            tool_input = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            tool_input = {}
            meta["arguments"] = arguments
    return {
        "part_type": "tool",
        "tool_call_id": call_id,
        "tool_name": name,
        "tool_input": tool_input,
        "metadata": meta,
    }


def _tool_output(call_id: str, output: Any, tool_names: dict[str, str], block: str) -> dict:
    meta: dict = {"block": block}
    if isinstance(output, str):
        text = output
    else:
        text = (
            "\n".join(p.get("text", "") for p in output if isinstance(p, dict) and "text" in p)
            if isinstance(output, list)
            else json.dumps(output, ensure_ascii=False)
        )
        meta["content"] = output
    part = {"part_type": "tool", "tool_call_id": call_id, "tool_output": text, "metadata": meta}
    if tool_names.get(call_id):
        part["tool_name"] = tool_names[call_id]
    return part


def _chat_message(item: dict, tool_names: dict[str, str]) -> dict | str:
    role = item.get("role")
    if role == "tool" or role == "function":
        call_id = item.get("tool_call_id") or item.get("name") or ""
        if not call_id:
            return "a tool message without tool_call_id"
        return {
            "role": "tool",
            "parts": [_tool_output(call_id, item.get("content"), tool_names, "tool")],
        }
    if role not in _ROLE:
        return f"role {role!r} is not system, developer, user, assistant or tool"
    parts = []
    if item.get("reasoning_content"):
        parts.append(
            {
                "part_type": "reasoning",
                "text_content": item["reasoning_content"],
                "metadata": {"block": "reasoning_content"},
            }
        )
    parts += _content_parts(item.get("content"), "chat")
    for call in item.get("tool_calls") or []:
        function = call.get("function") or {}
        if not call.get("id"):
            return "a tool call without id"
        tool_names[call["id"]] = function.get("name") or ""
        parts.append(
            _tool_call(
                call["id"], function.get("name") or "", function.get("arguments"), "tool_call"
            )
        )
    if role == "developer" and parts:
        parts[0].setdefault("metadata", {})["role"] = "developer"
    if item.get("name") and parts:
        parts[0].setdefault("metadata", {})["name"] = item["name"]
    return {"role": _ROLE[role], "parts": parts}


def _responses_item(item: dict, tool_names: dict[str, str]) -> dict | str:
    kind = item.get("type", "message")
    if kind == "message":
        return _chat_message(item, tool_names)
    if kind == "function_call":
        call_id = item.get("call_id")
        if not call_id:
            return "a function_call without call_id"
        tool_names[call_id] = item.get("name") or ""
        part = _tool_call(call_id, item.get("name") or "", item.get("arguments"), "function_call")
        if item.get("id"):
            part["metadata"]["item_id"] = item["id"]
        return {"role": "assistant", "parts": [part]}
    if kind == "function_call_output":
        call_id = item.get("call_id")
        if not call_id:
            return "a function_call_output without call_id"
        part = _tool_output(call_id, item.get("output"), tool_names, "function_call_output")
        return {"role": "tool", "parts": [part]}
    if kind == "reasoning":
        summary = item.get("summary") or []
        text = "\n".join(s.get("text", "") for s in summary if isinstance(s, dict))
        meta = {"block": "reasoning", "item": {k: v for k, v in item.items() if k != "type"}}
        return {
            "role": "assistant",
            "parts": [{"part_type": "reasoning", "text_content": text, "metadata": meta}],
        }
    return {
        "role": "assistant",
        "parts": [{"part_type": "text", "metadata": {"unknown_block": item}}],
    }


def parse(document: Any, *, session_id: str) -> Parsed:
    parsed = Parsed()
    items, envelope = items_of(document, "messages")
    if not items:
        items, envelope = items_of(document, "input")
    if not items:
        parsed.error(
            None, "expected a JSON array of messages, or an object with 'messages' or 'input'"
        )
        return parsed
    responses = _is_responses(document, items)
    conversation = ParsedConversation(session_id=session_id)
    tool_names: dict[str, str] = {}
    if envelope and isinstance(envelope.get("instructions"), str):
        conversation.messages.append(
            (
                0,
                {
                    "role": "system",
                    "external_id": "openai:instructions",
                    "parts": [
                        {
                            "part_type": "text",
                            "text_content": envelope["instructions"],
                            "metadata": {"block": "instructions"},
                        }
                    ],
                },
            )
        )
    for number, item in enumerate(items, start=1):
        if not isinstance(item, dict):
            parsed.error(number, "an item must be a JSON object")
            continue
        message = (_responses_item if responses else _chat_message)(item, tool_names)
        if isinstance(message, str):
            parsed.error(number, message)
            continue
        message["external_id"] = str(item.get("id") or f"openai:{number}")
        if item.get("created_at"):
            message["created_at"] = item["created_at"]
        conversation.messages.append((number, message))
    parsed.add(conversation)
    return parsed
