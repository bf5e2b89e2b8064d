"""The Anthropic Messages wire as the drop-in serves it: requests parsed into our blocks,
answers (JSON and the event stream) and errors in Anthropic's shapes."""

from __future__ import annotations

import json
from collections.abc import Iterator

from core.sse import sse_frame
from dropin.errors import DropinError, broken, invalid
from dropin.requests import DropinRequest, merge_consecutive
from providers import blocks as b
from providers.anthropic_wire import our_block
from providers.base import ProviderResponse, TextDelta, ToolCallDelta, ToolCallStart

NAME = WIRE = "anthropic"
ID_PREFIX = "msg_"
_ERROR_TYPES = {
    "invalid_request": "invalid_request_error",
    "authentication": "authentication_error",
    "not_found": "not_found_error",
    "too_large": "request_too_large",
    "upstream": "api_error",
}


# request ------------------------------------------------------------------------------------


def parse(body: dict, *, counting: bool = False) -> DropinRequest:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise invalid("model: Field required", "model")
    max_tokens = body.get("max_tokens")
    if not counting and (
        not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1
    ):
        raise invalid("max_tokens: Field required (a positive integer)", "max_tokens")
    raw_messages = body.get("messages")
    if not isinstance(raw_messages, list) or not raw_messages:
        raise invalid("messages: Field required (a non-empty array)", "messages")
    messages = []
    for index, message in enumerate(raw_messages):
        where = f"messages.{index}"
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            raise invalid(f"{where}.role: must be user or assistant", f"{where}.role")
        messages.append(
            {"role": message["role"], "blocks": _blocks(message.get("content"), f"{where}.content")}
        )
    messages = merge_consecutive(messages)
    if messages[0]["role"] != "user":
        raise invalid("messages.0.role: the first message must use the user role", "messages")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise invalid("stream: must be a boolean", "stream")
    options: dict = {}
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") in ("auto", "any", "none"):
        options["tool_choice"] = choice["type"]
        if "disable_parallel_tool_use" in choice:
            options["parallel_tool_calls"] = not choice["disable_parallel_tool_use"]
    if body.get("stop_sequences"):
        options["stop_sequences"] = list(body["stop_sequences"])
    return DropinRequest(
        wire=WIRE,
        model=model,
        system=_system(body.get("system")),
        messages=messages,
        tools=_tools(body.get("tools")),
        max_tokens=max_tokens if isinstance(max_tokens, int) else None,
        stream=stream,
        include_usage=True,
        options=options,
    )


def _system(system) -> str:
    if system is None:
        return ""
    if isinstance(system, str):
        return system
    if isinstance(system, list):
        texts = []
        for index, block in enumerate(system):
            if not isinstance(block, dict) or block.get("type") != "text":
                raise invalid(f"system.{index}: must be a text block", f"system.{index}")
            texts.append(str(block.get("text", "")))
        return "\n\n".join(texts)
    raise invalid("system: must be a string or an array of text blocks", "system")


def _blocks(content, where: str) -> list[dict]:
    if isinstance(content, str):
        return [b.text(content)]
    if not isinstance(content, list):
        raise invalid(f"{where}: must be a string or an array of blocks", where)
    out = []
    for index, block in enumerate(content):
        field = f"{where}.{index}"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            out.append(b.text(str(block.get("text", ""))))
        elif kind == "image":
            source = block.get("source")
            if not isinstance(source, dict) or source.get("type") not in ("base64", "url"):
                raise invalid(
                    f"{field}.source: a base64 or url source is required", f"{field}.source"
                )
            out.append(b.image(source.get("media_type", ""), source))
        elif kind == "tool_use":
            if not block.get("id") or not block.get("name"):
                raise invalid(f"{field}: a tool_use needs an id and a name", field)
            out.append(b.tool_use(block["id"], block["name"], block.get("input") or {}))
        elif kind == "tool_result":
            if not block.get("tool_use_id"):
                raise invalid(f"{field}.tool_use_id: Field required", f"{field}.tool_use_id")
            inner = block.get("content")
            content_blocks = (
                [b.text(inner)]
                if isinstance(inner, str)
                else _blocks(inner or [], f"{field}.content")
            )
            out.append(
                b.tool_result(block["tool_use_id"], content_blocks, bool(block.get("is_error")))
            )
        elif kind in ("thinking", "redacted_thinking"):
            out.append(our_block(block))
        else:
            raise invalid(f"{field}.type: {kind!r} is not supported", f"{field}.type")
    return out


def _tools(tools) -> list[dict]:
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise invalid("tools: must be an array", "tools")
    out = []
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict) or not tool.get("name"):
            raise invalid(f"tools.{index}.name: Field required", f"tools.{index}.name")
        out.append(
            {
                "name": tool["name"],
                "description": tool.get("description", ""),
                "input_schema": tool.get("input_schema") or {"type": "object", "properties": {}},
            }
        )
    return out


# answer -------------------------------------------------------------------------------------


def stop_reason(response: ProviderResponse) -> str:
    status, reason = response.outcome["status"], response.outcome.get("reason")
    if status == "paused" and any(block["type"] == "tool_use" for block in response.blocks):
        return "tool_use"
    if status == "incomplete" and reason in ("max_tokens", "length"):
        return "max_tokens"
    if response.outcome.get("code") == "refusal":
        return "refusal"
    if reason == "stop_sequence":
        return "stop_sequence"
    return "end_turn"


def wire_content(blocks: list[dict]) -> list[dict]:
    out = []
    for block in blocks:
        if block["type"] == "text":
            out.append({"type": "text", "text": block["text"]})
        elif block["type"] == "tool_use":
            out.append(
                {
                    "type": "tool_use",
                    "id": block["id"],
                    "name": block["name"],
                    "input": block["input"],
                }
            )
        elif block["type"] == "reasoning":
            raw = block.get("raw") or {}
            if raw.get("type") in ("thinking", "redacted_thinking"):
                out.append(raw)
    return out


def _usage(response: ProviderResponse) -> dict:
    spent = response.usage or {}
    return {
        "input_tokens": spent.get("input_tokens") or 0,
        "output_tokens": spent.get("output_tokens") or 0,
        "cache_read_input_tokens": spent.get("cache_read_input_tokens") or 0,
        "cache_creation_input_tokens": spent.get("cache_creation_input_tokens") or 0,
    }


def response_body(request: DropinRequest, response: ProviderResponse, answer_id: str) -> dict:
    return {
        "id": answer_id,
        "type": "message",
        "role": "assistant",
        "model": request.model,
        "content": wire_content(response.blocks),
        "stop_reason": stop_reason(response),
        "stop_sequence": None,
        "usage": _usage(response),
    }


def _event(name: str, payload: dict) -> bytes:
    return sse_frame(json.dumps(payload), event=name)


class StreamWriter:
    """message_start, one content block per upstream text run or tool call
    (content_block_start / _delta / _stop), message_delta, message_stop."""

    def __init__(self, request: DropinRequest, answer_id: str) -> None:
        self.request = request
        self.answer_id = answer_id
        self.open: tuple[str, int] | None = None  # (kind, upstream index) of the open block
        self.position = -1

    def start(self) -> Iterator[bytes]:
        yield _event(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": self.answer_id,
                    "type": "message",
                    "role": "assistant",
                    "model": self.request.model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 0, "output_tokens": 0},
                },
            },
        )

    def _close(self) -> Iterator[bytes]:
        if self.open is not None:
            yield _event(
                "content_block_stop", {"type": "content_block_stop", "index": self.position}
            )
            self.open = None

    def _begin(self, kind: str, index: int, block: dict) -> Iterator[bytes]:
        yield from self._close()
        self.position += 1
        self.open = (kind, index)
        yield _event(
            "content_block_start",
            {"type": "content_block_start", "index": self.position, "content_block": block},
        )

    def event(self, event) -> Iterator[bytes]:
        if isinstance(event, TextDelta) and event.text:
            if self.open != ("text", event.index):
                yield from self._begin("text", event.index, {"type": "text", "text": ""})
            yield _event(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": self.position,
                    "delta": {"type": "text_delta", "text": event.text},
                },
            )
        elif isinstance(event, ToolCallStart):
            yield from self._begin(
                "tool",
                event.index,
                {"type": "tool_use", "id": event.call_id, "name": event.name, "input": {}},
            )
        elif isinstance(event, ToolCallDelta) and self.open == ("tool", event.index):
            yield _event(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": self.position,
                    "delta": {"type": "input_json_delta", "partial_json": event.partial_json},
                },
            )

    def finish(self, response: ProviderResponse) -> Iterator[bytes]:
        yield from self._close()
        if broken(response):
            yield from self.error(
                DropinError(
                    502,
                    "upstream",
                    response.outcome.get("message") or "the upstream model failed",
                    code=response.outcome.get("code"),
                )
            )
            return
        yield _event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason(response), "stop_sequence": None},
                "usage": _usage(response),
            },
        )
        yield _event("message_stop", {"type": "message_stop"})

    def error(self, error: DropinError) -> Iterator[bytes]:
        yield _event("error", error_body(error))


def error_body(error: DropinError) -> dict:
    return {
        "type": "error",
        "error": {"type": _ERROR_TYPES.get(error.kind, "api_error"), "message": error.message},
    }
