"""A local HTTP server that speaks the Anthropic Messages API for the real SDK, including
its streaming protocol (server-sent events, byte for byte as documented).

    with FakeMessagesAPI() as api:
        api.enqueue(overloaded(), message("the summary"))
        client = anthropic.Anthropic(api_key="test", base_url=api.base_url, max_retries=0)
        ...
        assert len(api.requests) == 2
        assert api.requests[-1].body["model"] == "claude-test"

`POST /v1/messages` answers with the next scripted response: a `Scripted` (status, headers,
JSON body, optional delay before answering; or an SSE stream) or a callable that receives
the request and returns one (for tool loops that answer depending on what was sent). Every
request is recorded before it is answered, so a test can inspect a request even when it
hung. With the queue empty the server answers 500 with an `api_error` naming the problem.
Like the real API it answers 400 `invalid_request_error` to a body without `model`,
`max_tokens` or `messages`, and (API version 2026-10-21 and later) to `temperature`,
`top_p` or `top_k`.

Non-streaming builders: `message(text | content=[...], stop_reason=, input_tokens=,
output_tokens=)`, `text_block`, `tool_use_block`, `thinking_block`,
`redacted_thinking_block`, `error(status, type, text, headers)`, `authentication_error()`,
`permission_error()`, `overloaded()`, `rate_limited(retry_after)`, `server_error(status)`,
`hang(seconds)`.

Streaming builders (answer a `stream: true` request; each returns a `Scripted`):

- `anthropic_text_stream("hello world", chunks=3)`: message_start, ping,
  content_block_start, 3 text_delta events, content_block_stop, message_delta
  (stop_reason end_turn, usage), message_stop.
- `anthropic_tool_use_stream(name, input, id=None, text=None, chunks=3)`: optional text
  block, then a tool_use block whose input arrives as input_json_delta pieces; stop_reason
  tool_use.
- `anthropic_stream(content=[blocks], stop_reason=None, chunks=3, ...)`: any blocks
  (text, tool_use, thinking, redacted_thinking, or unknown types sent as they are).
- `anthropic_error_stream(error_type="overloaded_error", message="Overloaded",
  text="partial ")`: some text, then an `error` event (an error mid-stream).
- keyword arguments of every stream builder: `model`, `input_tokens`, `output_tokens`,
  `chunk_delay` (seconds before each event: a slow stream), `drop_after` (close the
  socket after that many events: a dropped connection), `unknown_event` (an event type
  the SDK does not know, sent after message_start), `ping` (default True).
- `Scripted.slowly(seconds)` and `Scripted.dropped_after(n)` adjust any scripted stream.

Retries are scripted with the JSON error builders (`rate_limited(retry_after=2)`,
`overloaded()`), which a streaming request receives before any byte of a stream.

Shutting down wakes any scripted delay at once, and every connection is closed after one
response, so `__exit__` never waits on a hanging handler thread.
"""

from __future__ import annotations

import copy
import dataclasses
import json

from tests.support.fake_http import SSE, FakeAPI, RecordedRequest, Responder, Scripted, next_id
from tests.support.fake_prompt_cache import AnthropicPromptCache

__all__ = ["FakeMessagesAPI", "RecordedRequest", "Responder", "SSE", "Scripted"]


# Content blocks ----------------------------------------------------------------------------


def text_block(text: str) -> dict:
    return {"type": "text", "text": text, "citations": None}


def thinking_block(thinking: str, signature: str = "sig-fake") -> dict:
    return {"type": "thinking", "thinking": thinking, "signature": signature}


def redacted_thinking_block(data: str = "redacted-fake") -> dict:
    return {"type": "redacted_thinking", "data": data}


def tool_use_block(name: str, input: dict, id: str | None = None) -> dict:
    return {
        "type": "tool_use",
        "id": id or f"toolu_fake{next_id():04d}",
        "name": name,
        "input": input,
    }


# Responses ---------------------------------------------------------------------------------


def message(
    text: str | None = None,
    *,
    content: list[dict] | None = None,
    model: str = "claude-fake-1",
    stop_reason: str | None = None,
    input_tokens: int = 100,
    output_tokens: int = 20,
    delay: float = 0.0,
) -> Scripted:
    """A 200 message; `text` is shorthand for one text block."""
    blocks = content if content is not None else ([text_block(text)] if text is not None else [])
    if stop_reason is None:
        stop_reason = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    body = {
        "id": f"msg_fake{next_id():06d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }
    return Scripted(200, body, delay=delay)


def error(
    status: int, error_type: str, text: str, headers: dict[str, str] | None = None
) -> Scripted:
    body = {"type": "error", "error": {"type": error_type, "message": text}}
    return Scripted(status, body, dict(headers or {}))


def authentication_error() -> Scripted:
    return error(401, "authentication_error", "invalid x-api-key")


def permission_error() -> Scripted:
    return error(
        403, "permission_error", "your API key does not have permission to use this resource"
    )


def overloaded() -> Scripted:
    return error(529, "overloaded_error", "Overloaded")


def rate_limited(retry_after: float | None = None) -> Scripted:
    headers = {} if retry_after is None else {"retry-after": f"{retry_after:g}"}
    return error(
        429, "rate_limit_error", "Number of requests has exceeded your rate limit", headers
    )


def server_error(status: int = 500) -> Scripted:
    return error(status, "api_error", "Internal server error")


def hang(seconds: float = 60.0) -> Scripted:
    """Answer only after `seconds` (or when the server shuts down): a stuck upstream."""
    return message("(answered after a hang)", delay=seconds)


# Streaming ----------------------------------------------------------------------------------


def _chunks(text: str, parts: int) -> list[str]:
    parts = max(1, parts)
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def anthropic_stream_events(
    content: list[dict],
    *,
    stop_reason: str | None = None,
    model: str = "claude-fake-1",
    input_tokens: int = 100,
    output_tokens: int = 20,
    chunks: int = 3,
    ping: bool = True,
    unknown_event: str | None = None,
    error: dict | None = None,
    end: bool = True,
) -> tuple[SSE, ...]:
    """The events of one streamed message, as the Messages API sends them."""
    if stop_reason is None:
        stop_reason = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
    events = [
        SSE(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": f"msg_fake{next_id():06d}",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": input_tokens,
                        "output_tokens": 1,
                        "cache_creation_input_tokens": 0,
                        "cache_read_input_tokens": 0,
                    },
                },
            },
        )
    ]
    if unknown_event:
        events.append(SSE(unknown_event, {"type": unknown_event, "detail": "a future event"}))
    if ping:
        events.append(SSE("ping", {"type": "ping"}))
    for index, block in enumerate(content):
        events.extend(_block_events(index, block, chunks))
    if error is not None:
        events.append(SSE("error", {"type": "error", "error": error}))
        return tuple(events)
    events.append(
        SSE(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": output_tokens},
            },
        )
    )
    if end:
        events.append(SSE("message_stop", {"type": "message_stop"}))
    return tuple(events)


def _block_events(index: int, block: dict, chunks: int) -> list[SSE]:
    kind = block["type"]
    if kind == "text":
        start = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": c} for c in _chunks(block["text"], chunks)]
    elif kind == "tool_use":
        start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
        arguments = json.dumps(block["input"])
        deltas = [
            {"type": "input_json_delta", "partial_json": c} for c in _chunks(arguments, chunks)
        ]
    elif kind == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [
            {"type": "thinking_delta", "thinking": c} for c in _chunks(block["thinking"], chunks)
        ]
        deltas.append({"type": "signature_delta", "signature": block.get("signature", "sig")})
    else:  # redacted_thinking and types we do not know arrive whole
        start, deltas = block, []
    events = [
        SSE(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": start},
        )
    ]
    events += [
        SSE("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
        for d in deltas
    ]
    events.append(SSE("content_block_stop", {"type": "content_block_stop", "index": index}))
    return events


def anthropic_stream(
    content: list[dict],
    *,
    chunk_delay: float = 0.0,
    drop_after: int | None = None,
    **kwargs,
) -> Scripted:
    return Scripted(
        200,
        events=anthropic_stream_events(content, **kwargs),
        chunk_delay=chunk_delay,
        drop_after=drop_after,
    )


def anthropic_text_stream(text: str, chunks: int = 3, **kwargs) -> Scripted:
    return anthropic_stream([text_block(text)], chunks=chunks, **kwargs)


def anthropic_tool_use_stream(
    name: str, input: dict, *, id: str | None = None, text: str | None = None, **kwargs
) -> Scripted:
    content = [text_block(text)] if text else []
    content.append(tool_use_block(name, input, id=id))
    return anthropic_stream(content, **kwargs)


def anthropic_error_stream(
    error_type: str = "overloaded_error",
    message: str = "Overloaded",
    *,
    text: str = "partial ",
    **kwargs,
) -> Scripted:
    content = [text_block(text)] if text else []
    return anthropic_stream(content, error={"type": error_type, "message": message}, **kwargs)


# The server ---------------------------------------------------------------------------------


class FakeMessagesAPI(FakeAPI):
    """The fake API on 127.0.0.1 with an ephemeral port, served from a background thread.

    `cache_control` rules are always enforced (more than four breakpoints, or a bad value:
    400). With `prompt_cache=True` the usage of every answer (input_tokens,
    cache_creation_input_tokens, cache_read_input_tokens) is computed from the prefixes
    received (tests/support/fake_prompt_cache.py) instead of the scripted figures, and
    `cache_reports` lists them in request order."""

    route = "/v1/messages"
    name = "fake Messages API"

    def __init__(self, *, prompt_cache: bool = False) -> None:
        super().__init__()
        self.prompt_cache = AnthropicPromptCache() if prompt_cache else None
        self.cache_reports: list[dict] = []

    def invalid(self, request: RecordedRequest) -> Scripted | None:
        problem = _invalid(request)
        if problem is None and isinstance(request.body, dict):
            problem = AnthropicPromptCache().refuse(request.body)
        return error(400, "invalid_request_error", problem) if problem else None

    def answer(self, request: RecordedRequest, scripted: Scripted) -> Scripted:
        if self.prompt_cache is None or scripted.status != 200:
            return scripted
        spent = self.prompt_cache.usage(request.body)
        self.cache_reports.append(spent)
        if scripted.events is not None:
            events = []
            for event in scripted.events:
                data = event.data
                if event.event == "message_start" and isinstance(data, dict):
                    data = copy.deepcopy(data)
                    data["message"]["usage"].update(spent)
                events.append(SSE(event.event, data))
            return dataclasses.replace(scripted, events=tuple(events))
        if isinstance(scripted.body, dict) and "usage" in scripted.body:
            body = copy.deepcopy(scripted.body)
            body["usage"].update(spent)
            return dataclasses.replace(scripted, body=body)
        return scripted

    def error_response(self, status: int, kind: str, text: str) -> Scripted:
        return error(status, kind, text)


# API version 2026-10-21 (sent by the SDK 2.x) refuses sampling parameters outright.
SAMPLING_REMOVED_IN = "2026-10-21"
_SAMPLING = ("temperature", "top_p", "top_k")


def _invalid(request: RecordedRequest) -> str | None:
    """What the real API would refuse with a 400, for the checks worth having in tests."""
    try:
        body = request.body
    except ValueError:
        return "request body is not valid JSON"
    if not isinstance(body, dict):
        return "request body must be a JSON object"
    for name in ("model", "max_tokens", "messages"):
        if name not in body:
            return f"{name}: Field required"
    if request.headers.get("anthropic-version", "") >= SAMPLING_REMOVED_IN:
        for name in _SAMPLING:
            if name in body:
                return f"{name}: Extra inputs are not permitted"
    return None
