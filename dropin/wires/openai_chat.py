"""The OpenAI Chat Completions wire as the drop-in serves it: requests parsed into our
blocks, answers (JSON and the chunk stream) and errors in OpenAI's shapes."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

from core.sse import sse_frame
from dropin.errors import DropinError, broken, invalid
from dropin.requests import DropinRequest, merge_consecutive
from dropin.wires.outcome import answer_end
from providers import blocks as b
from providers.base import ProviderResponse, TextDelta, ToolCallDelta, ToolCallStart
from providers.config import models
from providers.openai_chat_wire import parse_arguments

NAME = WIRE = "openai"
ID_PREFIX = "chatcmpl-"
_ERROR_TYPES = {
    "invalid_request": "invalid_request_error",
    "authentication": "invalid_request_error",
    "permission": "invalid_request_error",
    "not_found": "invalid_request_error",
    "too_large": "invalid_request_error",
    "upstream": "api_error",
}


# request ------------------------------------------------------------------------------------


def parse(body: dict) -> DropinRequest:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise invalid("'model' is required and must be a string", "model")
    raw_messages = body.get("messages")
    if not isinstance(raw_messages, list) or not raw_messages:
        raise invalid("'messages' is required and must be a non-empty array", "messages")
    system_parts, messages = _messages(raw_messages)
    if not messages or messages[0]["role"] != "user":
        raise invalid("the first non-system message must be a user message", "messages")
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is not None and (
        not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1
    ):
        raise invalid("'max_completion_tokens' must be a positive integer", "max_completion_tokens")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise invalid("'stream' must be a boolean", "stream")
    if body.get("n", 1) not in (1, None):
        raise invalid("'n' must be 1: one answer per request is stored", "n")
    stream_options = body.get("stream_options") or {}
    if not isinstance(stream_options, dict):
        raise invalid("'stream_options' must be an object", "stream_options")
    return DropinRequest(
        wire=WIRE,
        model=model,
        system="\n\n".join(part for part in system_parts if part),
        messages=messages,
        tools=_tools(body.get("tools")),
        max_tokens=max_tokens,
        stream=stream,
        include_usage=bool(stream_options.get("include_usage")),
        options=_options(body),
    )


def _messages(raw_messages: list) -> tuple[list[str], list[dict]]:
    """The system texts, and the other messages as our blocks (consecutive ones of one
    role merged)."""
    system_parts: list[str] = []
    messages: list[dict] = []
    for index, message in enumerate(raw_messages):
        if type(message) is dict:
            # The usual message: plain text from the user, or from the assistant without
            # tool calls (the same blocks as the general path below, without its checks).
            role, content = message.get("role"), message.get("content")
            if type(content) is str and (
                role == "user" or (role == "assistant" and not message.get("tool_calls"))
            ):
                blocks = [b.text(content)] if content or role == "user" else []
                messages.append({"role": role, "blocks": blocks})
                continue
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            raise invalid(f"{where} must be an object", where)
        if message.get("role") in ("system", "developer"):
            system_parts.append(_text_of(message.get("content"), f"{where}.content"))
        else:
            messages.append(_message(message, where))
    return system_parts, merge_consecutive(messages)


def _message(message: dict, where: str) -> dict:
    """A user, assistant or tool message (a tool result is the user's turn in our blocks)."""
    role = message.get("role")
    if role == "user":
        return {"role": "user", "blocks": _user_blocks(message, where)}
    if role == "assistant":
        return {"role": "assistant", "blocks": _assistant_blocks(message, where)}
    if role == "tool":
        call_id = message.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise invalid(f"{where}.tool_call_id is required", f"{where}.tool_call_id")
        text = _text_of(message.get("content"), f"{where}.content")
        return {"role": "user", "blocks": [b.tool_result(call_id, text)]}
    raise invalid(
        f"{where}.role must be one of system, developer, user, assistant, tool",
        f"{where}.role",
    )


def _options(body: dict) -> dict:
    """tool_choice, parallel_tool_calls and stop, as the provider layer names them."""
    options: dict = {}
    if body.get("tool_choice") in ("auto", "none", "required"):
        options["tool_choice"] = {"required": "any"}.get(body["tool_choice"], body["tool_choice"])
    if "parallel_tool_calls" in body:
        options["parallel_tool_calls"] = bool(body["parallel_tool_calls"])
    stop = body.get("stop")
    if stop:
        options["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    return options


def _text_of(content, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for index, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text":
                raise invalid(f"{where}[{index}] must be a text part here", f"{where}[{index}]")
            texts.append(str(part.get("text", "")))
        return "".join(texts)
    raise invalid(f"{where} must be a string or an array of parts", where)


def _user_blocks(message: dict, where: str) -> list[dict]:
    content = message.get("content")
    if isinstance(content, str):
        return [b.text(content)]
    if not isinstance(content, list):
        raise invalid(f"{where}.content must be a string or an array of parts", f"{where}.content")
    out = []
    for index, part in enumerate(content):
        field = f"{where}.content[{index}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            out.append(b.text(str(part.get("text", ""))))
        elif kind == "image_url":
            url = (part.get("image_url") or {}).get("url")
            if not isinstance(url, str) or not url:
                raise invalid(f"{field}.image_url.url is required", f"{field}.image_url.url")
            out.append(image_from_url(url))
        else:
            raise invalid(f"{field}.type {kind!r} is not supported (text, image_url)", field)
    return out


def image_from_url(url: str) -> dict:
    if url.startswith("data:") and ";base64," in url:
        head, data = url[5:].split(";base64,", 1)
        return b.image(head, {"type": "base64", "media_type": head, "data": data})
    return b.image("", {"type": "url", "url": url})


def _assistant_blocks(message: dict, where: str) -> list[dict]:
    out = []
    text = _text_of(message.get("content"), f"{where}.content")
    if text:
        out.append(b.text(text))
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        raise invalid(f"{where}.tool_calls must be an array", f"{where}.tool_calls")
    for index, call in enumerate(calls):
        field = f"{where}.tool_calls[{index}]"
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not call.get("id") or not function.get("name"):
            raise invalid(f"{field} needs an id and a function name", field)
        out.append(
            b.tool_use(
                call["id"], function["name"], parse_arguments(function.get("arguments") or "")
            )
        )
    return out


def _tools(tools) -> list[dict]:
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise invalid("'tools' must be an array", "tools")
    out = []
    for index, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if (
            tool.get("type") != "function"
            or not isinstance(function, dict)
            or not function.get("name")
        ):
            raise invalid(f"tools[{index}] must be a function with a name", f"tools[{index}]")
        out.append(
            {
                "name": function["name"],
                "description": function.get("description", ""),
                "input_schema": function.get("parameters") or {"type": "object", "properties": {}},
            }
        )
    return out


# answer -------------------------------------------------------------------------------------


FINISH_REASONS = {
    "tool": "tool_calls",
    "length": "length",
    "refusal": "content_filter",
    "stop_sequence": "stop",
    "end": "stop",
}


def finish_reason(response: ProviderResponse) -> str:
    return FINISH_REASONS[answer_end(response)]


def _usage(response: ProviderResponse) -> dict:
    spent = response.usage or {}
    prompt, completion = spent.get("input_tokens") or 0, spent.get("output_tokens") or 0
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": spent.get("cache_read_input_tokens") or 0},
    }


def assistant_message(blocks: list[dict]) -> dict:
    text = b.rendered_text(blocks)
    message: dict = {"role": "assistant", "content": text or None, "refusal": None}
    calls = [
        {
            "id": block["id"],
            "type": "function",
            "function": {"name": block["name"], "arguments": json.dumps(block.get("input") or {})},
        }
        for block in blocks
        if block["type"] == "tool_use"
    ]
    if calls:
        message["tool_calls"] = calls
    return message


def response_body(request: DropinRequest, response: ProviderResponse, answer_id: str) -> dict:
    return {
        "id": answer_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.model,
        "choices": [
            {
                "index": 0,
                "message": assistant_message(response.blocks),
                "logprobs": None,
                "finish_reason": finish_reason(response),
            }
        ],
        "usage": _usage(response),
    }


class StreamWriter:
    """The chunk stream: a role chunk, content and tool-call deltas, the finish chunk, the
    usage chunk when asked for, `[DONE]`."""

    def __init__(self, request: DropinRequest, answer_id: str) -> None:
        self.request = request
        self.answer_id = answer_id
        self.created = int(time.time())
        self.calls: dict[int, int] = {}  # upstream index -> our tool call index

    def _chunk(self, delta: dict, finish: str | None = None) -> bytes:
        payload = {
            "id": self.answer_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.request.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        return sse_frame(json.dumps(payload))

    def start(self) -> Iterator[bytes]:
        yield self._chunk({"role": "assistant", "content": ""})

    def event(self, event) -> Iterator[bytes]:
        if isinstance(event, TextDelta) and event.text:
            yield self._chunk({"content": event.text})
        elif isinstance(event, ToolCallStart):
            position = self.calls[event.index] = len(self.calls)
            yield self._chunk(
                {
                    "tool_calls": [
                        {
                            "index": position,
                            "id": event.call_id,
                            "type": "function",
                            "function": {"name": event.name, "arguments": ""},
                        }
                    ]
                }
            )
        elif isinstance(event, ToolCallDelta) and event.index in self.calls:
            yield self._chunk(
                {
                    "tool_calls": [
                        {
                            "index": self.calls[event.index],
                            "function": {"arguments": event.partial_json},
                        }
                    ]
                }
            )

    def finish(self, response: ProviderResponse) -> Iterator[bytes]:
        if broken(response):
            yield from self.error(
                DropinError(
                    502,
                    "upstream",
                    response.outcome.get("message") or "upstream failed",
                    code=response.outcome.get("code"),
                )
            )
            return
        yield self._chunk({}, finish_reason(response))
        if self.request.include_usage:
            payload = {
                "id": self.answer_id,
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": self.request.model,
                "choices": [],
                "usage": _usage(response),
            }
            yield sse_frame(json.dumps(payload))
        yield sse_frame("[DONE]")

    def error(self, error: DropinError) -> Iterator[bytes]:
        yield sse_frame(json.dumps(error_body(error)))


def error_body(error: DropinError) -> dict:
    return {
        "error": {
            "message": error.message,
            "type": _ERROR_TYPES.get(error.kind, "invalid_request_error"),
            "param": error.param,
            "code": error.code,
        }
    }


def models_body() -> dict:
    """`GET /models`: the configured models in OpenAI's list shape."""
    return {
        "object": "list",
        "data": [
            {"id": spec.name, "object": "model", "created": 0, "owned_by": spec.provider}
            for spec in models()
        ],
    }
