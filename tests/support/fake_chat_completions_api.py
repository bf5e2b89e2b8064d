"""A local HTTP server that speaks the OpenAI Chat Completions API
(`POST /v1/chat/completions`) for the real `openai` SDK, JSON and streaming (data-only
server-sent events of `chat.completion.chunk` objects, a usage chunk when the request asks
for it with `stream_options.include_usage`, then `data: [DONE]`), as OpenAI and the
compatible servers (Ollama, vLLM, llama.cpp) send them.

    with FakeChatCompletionsAPI() as api:
        api.enqueue(chat_text_stream("hi"))
        client = openai.OpenAI(api_key="test", base_url=api.base_url, max_retries=0)

Scripting, recording, hangs and shutdown as in fake_http. Like the real API it answers 400
`invalid_request_error` to a body without `model` or `messages`.

Builders (each returns a `Scripted`, or a responder that reads the request):
- `chat_text_stream(text, chunks=3, usage=True)`: role chunk, content chunks, a chunk with
  `finish_reason: stop`, the usage chunk (when the request asked for it), `[DONE]`.
- `chat_tool_call_stream(name, arguments, call_id=None, text=None, chunks=3)`: optional
  text, then one tool call whose arguments arrive in pieces, `finish_reason: tool_calls`.
- `chat_completion(text=None, tool_calls=[...], finish_reason="stop", ...)`: a JSON answer.
- `chat_error(status, type, code, message)`, `chat_rate_limited(retry_after)`.
- keyword arguments of the stream builders: `model`, `prompt_tokens`, `completion_tokens`,
  `cached_tokens`, `chunk_delay`, `drop_after`.
"""

from __future__ import annotations

import json
import time

from tests.support.fake_http import SSE, FakeAPI, RecordedRequest, Scripted, next_id

__all__ = ["FakeChatCompletionsAPI", "RecordedRequest", "SSE", "Scripted"]


def _chunks(text: str, parts: int) -> list[str]:
    parts = max(1, parts)
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def usage_object(prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> dict:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens},
    }


def tool_call(name: str, arguments: dict | str, call_id: str | None = None) -> dict:
    return {
        "id": call_id or f"call_fake{next_id():06d}",
        "type": "function",
        "function": {
            "name": name,
            "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
        },
    }


def chat_completion(
    text: str | None = "hello",
    *,
    tool_calls: list[dict] | None = None,
    finish_reason: str | None = None,
    model: str = "gpt-fake",
    prompt_tokens: int = 12,
    completion_tokens: int = 5,
    cached_tokens: int = 0,
) -> Scripted:
    message: dict = {"role": "assistant", "content": text, "refusal": None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return Scripted(
        200,
        {
            "id": f"chatcmpl-fake{next_id():06d}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop"),
                }
            ],
            "usage": usage_object(prompt_tokens, completion_tokens, cached_tokens),
        },
    )


def _stream(
    deltas: list[dict],
    finish_reason: str,
    *,
    model: str = "gpt-fake",
    prompt_tokens: int = 12,
    completion_tokens: int = 5,
    cached_tokens: int = 0,
    usage: bool = True,
    chunk_delay: float = 0.0,
    drop_after: int | None = None,
) -> Scripted:
    chunk_id = f"chatcmpl-fake{next_id():06d}"
    created = int(time.time())

    def chunk(delta: dict, finish: str | None = None, **extra) -> SSE:
        return SSE(
            None,
            {
                "id": chunk_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                ],
                **extra,
            },
        )

    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk(delta) for delta in deltas]
    events.append(chunk({}, finish_reason))
    if usage:
        events.append(
            SSE(
                None,
                {
                    "id": chunk_id,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                    "choices": [],
                    "usage": usage_object(prompt_tokens, completion_tokens, cached_tokens),
                },
            )
        )
    events.append(SSE(None, "[DONE]"))
    return Scripted(200, events=tuple(events), chunk_delay=chunk_delay, drop_after=drop_after)


def chat_text_stream(text: str, chunks: int = 3, **kwargs) -> Scripted:
    return _stream([{"content": piece} for piece in _chunks(text, chunks)], "stop", **kwargs)


def chat_tool_call_stream(
    name: str,
    arguments: dict | str,
    call_id: str | None = None,
    text: str | None = None,
    chunks: int = 3,
    **kwargs,
) -> Scripted:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    deltas = [{"content": piece} for piece in _chunks(text, chunks)] if text else []
    deltas.append(
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": call_id or f"call_fake{next_id():06d}",
                    "type": "function",
                    "function": {"name": name, "arguments": ""},
                }
            ]
        }
    )
    deltas += [
        {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}
        for piece in _chunks(args, chunks)
    ]
    return _stream(deltas, "tool_calls", **kwargs)


def chat_error(status: int, kind: str, code: str | None, message: str, headers=None) -> Scripted:
    return Scripted(
        status,
        {"error": {"message": message, "type": kind, "param": None, "code": code}},
        headers=dict(headers or {}),
    )


def chat_rate_limited(retry_after: float | None = None) -> Scripted:
    headers = {"retry-after": str(retry_after)} if retry_after is not None else {}
    return chat_error(429, "requests", "rate_limit_exceeded", "Rate limit reached", headers)


class FakeChatCompletionsAPI(FakeAPI):
    route = "/v1/chat/completions"
    url_suffix = "/v1"
    name = "fake Chat Completions API"

    def invalid(self, request: RecordedRequest) -> Scripted | None:
        try:
            body = request.body
        except ValueError:
            return chat_error(400, "invalid_request_error", None, "invalid JSON body")
        if not isinstance(body, dict):
            return chat_error(400, "invalid_request_error", None, "body must be an object")
        for name in ("model", "messages"):
            if name not in body:
                return chat_error(
                    400,
                    "invalid_request_error",
                    "missing_required_parameter",
                    f"Missing required parameter: '{name}'.",
                )
        return None

    def error_response(self, status: int, kind: str, text: str) -> Scripted:
        return chat_error(status, kind, None, text)
