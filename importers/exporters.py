"""Export a conversation: as JSONL (our message shape, every part column), or as an
Anthropic Messages request body or an OpenAI Chat Completions message list.

JSONL is lossless: each line is exactly what `POST .../messages/` and
`lcm_import jsonl` accept, so an export imports into another database with the same
messages and parts (role, content, time, token count, every part column).

The Anthropic and OpenAI exports are what those APIs accept: roles alternate where the
API needs it (consecutive messages of one role are merged), system text goes where the
API wants it, and the parts become the API's blocks. They keep text, tool calls and
results, images and (Anthropic) thinking; they drop what the APIs have no place for
(timestamps, compaction events, step parts).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from decimal import Decimal
from typing import Any

from conversations.archive_port import hydrate_messages
from conversations.models import Conversation, Message, MessagePart, PartType, Role

FORMATS = ("jsonl", "anthropic", "openai")
_PART_COLUMNS = [
    f.name
    for f in MessagePart._meta.concrete_fields
    if f.name not in ("id", "message", "session_id", "part_type", "ordinal")
]


def _messages(conversation: Conversation) -> Iterator[Message]:
    """In seq order, archived content read back from its segments (docs/retention.md), so
    an export before and after archiving is the same."""
    rows = (
        Message.objects.filter(conversation=conversation)
        .order_by("seq")
        .prefetch_related("parts")
        .iterator(chunk_size=1000)
    )
    batch: list[Message] = []
    for message in rows:
        batch.append(message)
        if len(batch) == 1000:
            yield from hydrate_messages(batch)
            batch = []
    yield from hydrate_messages(batch)


def _parts(message: Message) -> list[MessagePart]:
    return sorted(message.parts.all(), key=lambda p: p.ordinal)


def part_ordinals(message_ids: Sequence[int]) -> dict[int, list[int]]:
    """The exporters' reader, for the integrity check `part_reader_disorder`."""
    found: dict[int, list[int]] = {}
    for conversation in Conversation.objects.filter(messages__pk__in=message_ids).distinct():
        for message in _messages(conversation):
            if message.pk in message_ids:
                found[message.pk] = [p.ordinal for p in _parts(message)]
    return found


def _plain(value: Any) -> Any:
    return str(value) if isinstance(value, Decimal) else value


# -- JSONL ---------------------------------------------------------------------------


def message_record(message: Message) -> dict:
    parts = []
    for part in _parts(message):
        record = {"part_type": part.part_type, "ordinal": part.ordinal}
        for name in _PART_COLUMNS:
            value = getattr(part, name)
            if value is not None:
                record[name] = _plain(value)
        parts.append(record)
    record = {
        "role": message.role,
        "content": message.content,
        "created_at": message.created_at.isoformat(),
        "external_id": message.external_id or f"lcm:{message.conversation_id}:{message.seq}",
    }
    if parts:
        record["parts"] = parts
    return record


def export_jsonl(conversation: Conversation) -> Iterator[str]:
    for message in _messages(conversation):
        yield json.dumps(message_record(message), ensure_ascii=False) + "\n"


# -- Anthropic -----------------------------------------------------------------------


def _meta(part: MessagePart) -> dict:
    return part.metadata if isinstance(part.metadata, dict) else {}


def _source_from_url(url: str, mime: str | None) -> dict:
    if url.startswith("data:") and ";base64," in url:
        head, data = url[5:].split(";base64,", 1)
        return {
            "type": "base64",
            "media_type": head or mime or "application/octet-stream",
            "data": data,
        }
    if url.startswith("file-id:"):
        return {"type": "file", "file_id": url[len("file-id:") :]}
    return {"type": "url", "url": url}


def _anthropic_block(part: MessagePart, role: str) -> dict | None:
    meta = _meta(part)
    if "unknown_block" in meta and isinstance(meta["unknown_block"], dict):
        return meta["unknown_block"]
    extra = meta.get("extra") if isinstance(meta.get("extra"), dict) else {}
    if part.part_type == PartType.TEXT and part.text_content is not None:
        return {"type": "text", "text": part.text_content, **extra}
    if part.part_type == PartType.REASONING:
        if meta.get("block") == "redacted_thinking":
            return {"type": "redacted_thinking", "data": meta.get("redacted", ""), **extra}
        block = {"type": "thinking", "thinking": part.text_content or ""}
        if meta.get("signature"):
            block["signature"] = meta["signature"]
        return {**block, **extra}
    if part.part_type == PartType.TOOL:
        is_result = meta.get("block") in ("tool_result", "tool", "function_call_output") or (
            role == Role.TOOL
        )
        if is_result:
            content: Any = meta.get("content") or part.tool_output or ""
            block = {
                "type": "tool_result",
                "tool_use_id": part.tool_call_id or "",
                "content": content,
            }
            if part.tool_status == "error" or meta.get("is_error"):
                block["is_error"] = True
            return {**block, **extra}
        kind = "server_tool_use" if meta.get("block") == "server_tool_use" else "tool_use"
        return {
            "type": kind,
            "id": part.tool_call_id or "",
            "name": part.tool_name or "",
            "input": part.tool_input if part.tool_input is not None else {},
            **extra,
        }
    if part.part_type == PartType.FILE:
        if part.file_url:
            source = _source_from_url(part.file_url, part.file_mime)
            kind = (
                "image"
                if (part.file_mime or source.get("media_type", "")).startswith("image/")
                or meta.get("block") in ("image", "image_url", "input_image")
                else "document"
            )
            block = {"type": kind, "source": source, **extra}
        elif part.text_content is not None:
            block = {
                "type": "document",
                "source": {"type": "text", "media_type": "text/plain", "data": part.text_content},
                **extra,
            }
        else:
            return None
        if part.file_name and block["type"] == "document":
            block["title"] = part.file_name
        return block
    if part.text_content:
        return {"type": "text", "text": part.text_content}
    return None


def _blocks(message: Message) -> list[dict]:
    parts = _parts(message)
    if not parts:
        return [{"type": "text", "text": message.content}] if message.content else []
    return [b for p in parts if (b := _anthropic_block(p, message.role)) is not None]


def export_anthropic(conversation: Conversation) -> dict:
    system: list[str] = []
    messages: list[dict] = []
    for message in _messages(conversation):
        if message.role == Role.SYSTEM:
            text = "\n".join(b["text"] for b in _blocks(message) if b.get("type") == "text")
            if text:
                system.append(text)
            continue
        role = "assistant" if message.role == Role.ASSISTANT else "user"
        blocks = _blocks(message)
        if not blocks:
            continue
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})
    body: dict = {"messages": messages}
    if system:
        body["system"] = "\n\n".join(system)
    return body


# -- OpenAI Chat Completions ----------------------------------------------------------


def _openai_content(parts: list[dict]) -> str | list[dict]:
    if all(p["type"] == "text" for p in parts) and len(parts) == 1:
        return parts[0]["text"]
    return parts


def _openai_message(message: Message) -> list[dict]:
    texts: list[dict] = []
    calls: list[dict] = []
    results: list[dict] = []
    for part in _parts(message) or []:
        meta = _meta(part)
        if part.part_type == PartType.TEXT and part.text_content is not None:
            texts.append({"type": "text", "text": part.text_content})
        elif part.part_type == PartType.FILE and part.file_url:
            texts.append({"type": "image_url", "image_url": {"url": part.file_url}})
        elif part.part_type == PartType.TOOL:
            block = _anthropic_block(part, message.role)
            if block and block["type"] == "tool_result":
                results.append(
                    {
                        "role": "tool",
                        "tool_call_id": part.tool_call_id or "",
                        "content": part.tool_output or "",
                    }
                )
            else:
                arguments = meta.get("arguments")
                if not isinstance(arguments, str):
                    arguments = json.dumps(
                        part.tool_input if part.tool_input is not None else {}, ensure_ascii=False
                    )
                calls.append(
                    {
                        "id": part.tool_call_id or "",
                        "type": "function",
                        "function": {"name": part.tool_name or "", "arguments": arguments},
                    }
                )
    if not message.parts.all() and message.content:
        texts.append({"type": "text", "text": message.content})
    out: list[dict] = []
    if message.role == Role.TOOL or (results and not texts and not calls):
        return results
    if texts or calls:
        role = message.role if message.role in ("system", "user", "assistant") else "user"
        entry: dict = {"role": role}
        if role == "assistant":
            entry["content"] = "\n".join(t["text"] for t in texts if t["type"] == "text") or None
            if calls:
                entry["tool_calls"] = calls
        else:
            entry["content"] = _openai_content(texts) if texts else ""
        out.append(entry)
    return out + results


def export_openai(conversation: Conversation) -> dict:
    messages: list[dict] = []
    for message in _messages(conversation):
        messages.extend(_openai_message(message))
    return {"messages": messages}
