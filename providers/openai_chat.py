"""The OpenAI Chat Completions adapter (`provider = "openai_chat"`), through the official
`openai` SDK: for OpenAI itself and for every server that speaks this wire (Ollama, vLLM,
llama.cpp's server, LM Studio, OpenRouter...), named by the model's `base_url_env`.

Requests: providers/openai_chat_wire.py builds the messages (and enforces the tool ordering
rules); `max_completion_tokens` bounds the answer; with tools, `tool_choice` and
`parallel_tool_calls` (from `[openai]` config or the request's options). A stream asks for
the usage chunk (`stream_options.include_usage`).

Streaming reads the SDK's raw server-sent events (data-only chunks, each journaled as a
`RawEvent` of type `chat.completion.chunk`); text arrives as `TextDelta(0, ...)` and tool
call `i` as `ToolCallStart(i + 1, ...)` then `ToolCallDelta(i + 1, ...)`. The stream ends
at `[DONE]` (or the end of the body); one that ends without a `finish_reason` ends
`incomplete` (`connection_lost`) and keeps what came.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterator
from dataclasses import dataclass

import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from providers import blocks as b
from providers.base import (
    ProviderRequest,
    ProviderResponse,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    outcome,
)
from providers.calls import scrub
from providers.config import ModelSpec, engine_config
from providers.openai_chat_wire import (
    PROVIDER,
    message_blocks,
    outcome_for_finish_reason,
    usage_of,
    wire_messages,
    wire_tools,
)
from providers.sdk_adapter import SdkAdapter, WireStreamReader

logger = logging.getLogger("providers")

CHUNK = "chat.completion.chunk"


class OpenAIChatProvider(SdkAdapter):
    name = PROVIDER
    sdk = openai
    error_field = "code"

    def build_params(self, request: ProviderRequest) -> dict:
        options = request.options
        params: dict = {
            "model": self.spec.model_id,
            "messages": wire_messages(request.system, request.messages),
            "max_completion_tokens": request.max_output_tokens,
        }
        if request.tools:
            params["tools"] = wire_tools(request.tools)
            params["tool_choice"] = options.get("tool_choice", "auto")
            params["parallel_tool_calls"] = bool(
                options.get("parallel_tool_calls", engine_config().openai.parallel_tool_calls)
            )
        if options.get("stop_sequences"):
            params["stop"] = list(options["stop_sequences"])
        if request.cache is not None and request.cache.key and self.spec.cache == "auto":
            # As for the Responses adapter: the key routes a branch's requests to the same
            # prompt cache (providers/caching.py); `cache = "off"` leaves it out for servers
            # that refuse fields they do not know.
            params["prompt_cache_key"] = request.cache.key
        return params

    def create(self, client, params: dict, *, stream: bool):
        # `client.post` (the SDK's documented call for any path) sends our body as it is:
        # the typed `chat.completions.create` re-walks every message of the body against
        # its TypedDicts first, which costs ~0.1 ms per message (150 ms for a long history).
        options = {"timeout": self.timeout}
        if stream:
            return client.post(
                "/chat/completions",
                body={**params, "stream": True, "stream_options": {"include_usage": True}},
                cast_to=ChatCompletion,
                options=options,
                stream=True,
                stream_cls=openai.Stream[ChatCompletionChunk],
            )
        return client.post(
            "/chat/completions", body=params, cast_to=ChatCompletion, options=options
        )

    def response_from_raw(self, raw_request: dict, raw: dict, secrets) -> ProviderResponse:
        return response_from_completion(self.spec, raw_request, raw)

    def stream_reader(self, raw_request: dict, secrets) -> _StreamReader:
        return _StreamReader(
            self.spec, {**raw_request, "stream_options": {"include_usage": True}}, secrets
        )


def response_from_completion(spec: ModelSpec, raw_request: dict, raw: dict) -> ProviderResponse:
    choices = raw.get("choices") or [{}]
    choice = choices[0] or {}
    content = message_blocks(choice.get("message") or {})
    status, reason, code = outcome_for_finish_reason(choice.get("finish_reason"))
    return ProviderResponse(
        raw_request=raw_request,
        raw_response=raw,
        blocks=content,
        items=b.items_from_blocks(content),
        outcome=outcome(status, reason, code, "the model refused" if code == "refusal" else None),
        usage=usage_of(raw.get("usage")),
        model=raw.get("model") or spec.model_id,
    )


@dataclass
class _Named:
    """A raw SSE with the event name this wire leaves out (its chunks are data-only)."""

    event: str
    data: str


class _StreamReader(WireStreamReader):
    provider = PROVIDER

    def __init__(self, spec: ModelSpec, raw_request: dict, secrets: tuple[str, ...]) -> None:
        self.spec = spec
        self.raw_request = raw_request
        self.secrets = secrets
        self.head: dict = {}  # id, model, created of the first chunk
        self.text: list[str] = []
        self.calls: dict[int, dict] = {}  # tool calls by their wire index
        self.finish_reason: str | None = None
        self.usage: dict | None = None
        self.error: dict | None = None

    def raw_events(self, response_stream):
        for sse in response_stream._iter_events():
            yield _Named(sse.event or CHUNK, sse.data)

    def done(self) -> bool:
        return self.error is not None  # the usage chunk follows the finish_reason

    def _apply(self, event_type: str, payload: dict) -> Iterator[StreamEvent]:
        if "error" in payload and not payload.get("choices"):
            self.error = copy.deepcopy(payload.get("error") or {})
            return
        if not self.head:
            self.head = {k: payload.get(k) for k in ("id", "model", "created")}
        if payload.get("usage"):
            self.usage = copy.deepcopy(payload["usage"])
        for choice in payload.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if delta.get("content"):
                self.text.append(delta["content"])
                yield TextDelta(0, delta["content"])
            for call in delta.get("tool_calls") or []:
                position = int(call.get("index", 0))
                function = call.get("function") or {}
                known = self.calls.get(position)
                if known is None:
                    known = self.calls[position] = {
                        "id": call.get("id") or "",
                        "type": "function",
                        "function": {"name": function.get("name") or "", "arguments": ""},
                    }
                    yield ToolCallStart(position + 1, known["id"], known["function"]["name"])
                if function.get("arguments"):
                    known["function"]["arguments"] += function["arguments"]
                    yield ToolCallDelta(position + 1, function["arguments"])
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]

    def _message(self) -> dict:
        message: dict = {"role": "assistant", "content": "".join(self.text) or None}
        if self.calls:
            message["tool_calls"] = [self.calls[i] for i in sorted(self.calls)]
        return message

    def _response(self, broken: str | None) -> ProviderResponse:
        message = self._message()
        raw = {
            **self.head,
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason}],
            "usage": self.usage,
        }
        content = message_blocks(message)
        if self.error is not None:
            code = str(self.error.get("code") or self.error.get("type") or "error")
            text = scrub(str(self.error.get("message") or ""), self.secrets)
            raw["error"] = {"code": code, "message": text}
            result = outcome("failed", "error", code, text)
        elif self.finish_reason is None:
            reason = broken or "connection_lost"
            result = outcome(
                "incomplete", reason, reason, "the stream ended before a finish_reason"
            )
        else:
            status, reason, code = outcome_for_finish_reason(self.finish_reason)
            result = outcome(
                status, reason, code, "the model refused" if code == "refusal" else None
            )
        return ProviderResponse(
            raw_request=self.raw_request,
            raw_response=raw,
            blocks=content,
            items=b.items_from_blocks(content),
            outcome=result,
            usage=usage_of(self.usage),
            model=self.head.get("model") or self.spec.model_id,
        )
