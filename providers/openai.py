"""The OpenAI Responses API adapter, through the official `openai` SDK.

Requests always carry the policy parameters explicitly (SRD 11.2): `max_output_tokens`,
`truncation` ("disabled" unless `[openai] truncation` says "auto"), `store` and
`parallel_tool_calls` from `[openai]` config (a request's options may override the last
two). With `store = false`, `include: ["reasoning.encrypted_content"]` asks for reasoning
items we can send back in a tool loop (`[openai] include_encrypted_reasoning = false` turns
that off for models that refuse it). Keys come from the environment at call time.

Streaming reads every server-sent event (RawEvent for each), accumulates output items by
`output_index` and their text by `content_index`, and takes the final `response` of
`response.completed` / `response.incomplete` / `response.failed` as authoritative. An
`error` event ends the stream `failed` with its code; a stream that ends before a terminal
event ends `incomplete` (`connection_lost`) with the items received so far. Unknown event
types are logged and ignored.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterator

import openai
from openai.types.responses import Response, ResponseStreamEvent

from providers.base import (
    ProviderRequest,
    ProviderResponse,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    outcome,
    usage,
)
from providers.calls import (
    scrub,
)
from providers.config import ModelSpec, engine_config
from providers.openai_wire import (
    PROVIDER,
    convert_output,
    response_from_object,
    wire_input,
    wire_tools,
)
from providers.sdk_adapter import SdkAdapter, WireStreamReader, make_sdk_client

logger = logging.getLogger("providers")

_TERMINAL = {"response.completed", "response.incomplete", "response.failed"}
# Events we read or knowingly skip (their content also arrives in output_item.done).
_KNOWN = _TERMINAL | {
    "response.created",
    "response.in_progress",
    "response.queued",
    "response.output_item.added",
    "response.output_item.done",
    "response.content_part.added",
    "response.content_part.done",
    "response.output_text.delta",
    "response.output_text.done",
    "response.output_text.annotation.added",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "response.custom_tool_call_input.delta",
    "response.custom_tool_call_input.done",
    "response.refusal.delta",
    "response.refusal.done",
    "response.reasoning_summary_part.added",
    "response.reasoning_summary_part.done",
    "response.reasoning_summary_text.delta",
    "response.reasoning_summary_text.done",
    "response.reasoning_text.delta",
    "response.reasoning_text.done",
    "error",
}


def make_client(**kwargs) -> openai.OpenAI:
    """An OpenAI client with the SDK's retries off (providers/sdk_adapter.py)."""
    return make_sdk_client(openai, **kwargs)


class OpenAIProvider(SdkAdapter):
    name = PROVIDER
    sdk = openai
    error_field = "code"

    def build_params(self, request: ProviderRequest) -> dict:
        config = engine_config().openai
        options = request.options
        store = bool(options.get("store", config.store))
        params: dict = {
            "model": self.spec.model_id,
            "input": wire_input(request.messages),
            "max_output_tokens": request.max_output_tokens,
            "truncation": options.get("truncation", config.truncation),
            "store": store,
            "parallel_tool_calls": bool(
                options.get("parallel_tool_calls", config.parallel_tool_calls)
            ),
        }
        if request.system:
            params["instructions"] = request.system
        if request.tools:
            params["tools"] = wire_tools(request.tools)
            params["tool_choice"] = options.get("tool_choice", "auto")
        if not store and config.include_encrypted_reasoning:
            params["include"] = ["reasoning.encrypted_content"]
        if request.cache is not None and request.cache.key and self.spec.cache == "auto":
            # OpenAI caches prefixes automatically; the key routes a branch's requests to
            # the same cache (providers/caching.py).
            params["prompt_cache_key"] = request.cache.key
        return params

    def create(self, client, params: dict, *, stream: bool):
        # `client.post` (the SDK's documented call for any path) sends our body as it is:
        # the typed `responses.create` first walks every input item against its
        # TypedDicts, ~1.4 ms an item (1.4 s of CPU for 1,000 items; docs/benchmarks.md).
        options = {"timeout": self.timeout}
        if stream:
            return client.post(
                "/responses",
                body={**params, "stream": True},
                cast_to=Response,
                options=options,
                stream=True,
                stream_cls=openai.Stream[ResponseStreamEvent],
            )
        return client.post("/responses", body=params, cast_to=Response, options=options)

    def response_from_raw(self, raw_request: dict, raw: dict, secrets) -> ProviderResponse:
        return response_from_object(self.spec, raw_request, raw, secrets)

    def stream_reader(self, raw_request: dict, secrets) -> _StreamReader:
        return _StreamReader(self.spec, raw_request, secrets)


class _StreamReader(WireStreamReader):
    provider = PROVIDER

    def __init__(self, spec: ModelSpec, raw_request: dict, secrets: tuple[str, ...]) -> None:
        self.spec = spec
        self.raw_request = raw_request
        self.secrets = secrets
        self.snapshot: dict = {}  # the response object of response.created
        self.output: dict[int, dict] = {}  # items by output_index
        self.final: dict | None = None
        self.error: dict | None = None

    def raw_events(self, response_stream):
        # The SDK's raw SSE iterator gives the wire events themselves (unknown types
        # included) for the journal; its typed iteration would hide some.
        return response_stream._iter_events()

    def done(self) -> bool:
        return self.final is not None or self.error is not None

    def _apply(self, event_type: str, payload: dict) -> Iterator[StreamEvent]:
        index = payload.get("output_index")
        if event_type in ("response.created", "response.in_progress", "response.queued"):
            self.snapshot = copy.deepcopy(payload.get("response") or {})
        elif event_type in ("response.output_item.added", "response.output_item.done"):
            item = copy.deepcopy(payload.get("item") or {})
            if event_type.endswith("added"):
                if item.get("type") == "message":
                    item.setdefault("content", [])
                if item.get("type") == "function_call":
                    item.setdefault("arguments", "")
                    yield ToolCallStart(
                        int(index or 0), item.get("call_id", ""), item.get("name", "")
                    )
            self.output[int(index or 0)] = item
        elif event_type == "response.content_part.added":
            self._part(payload, create=copy.deepcopy(payload.get("part") or {}))
        elif event_type == "response.output_text.delta":
            part = self._part(
                payload, create={"type": "output_text", "text": "", "annotations": []}
            )
            part["text"] = part.get("text", "") + payload.get("delta", "")
            yield TextDelta(int(index or 0), payload.get("delta", ""))
        elif event_type == "response.output_text.done":
            self._part(payload, create={"type": "output_text", "annotations": []})["text"] = (
                payload.get("text", "")
            )
        elif event_type == "response.function_call_arguments.delta":
            item = self.output.setdefault(
                int(index or 0), {"type": "function_call", "arguments": ""}
            )
            item["arguments"] = item.get("arguments", "") + payload.get("delta", "")
            yield ToolCallDelta(int(index or 0), payload.get("delta", ""))
        elif event_type == "response.function_call_arguments.done":
            item = self.output.setdefault(int(index or 0), {"type": "function_call"})
            item["arguments"] = payload.get("arguments", "")
        elif event_type == "response.custom_tool_call_input.delta":
            item = self.output.setdefault(int(index or 0), {"type": "custom_tool_call"})
            item["input"] = item.get("input", "") + payload.get("delta", "")
        elif event_type == "response.custom_tool_call_input.done":
            item = self.output.setdefault(int(index or 0), {"type": "custom_tool_call"})
            item["input"] = payload.get("input", "")
        elif event_type in _TERMINAL:
            self.final = copy.deepcopy(payload.get("response") or {})
        elif event_type == "error":
            self.error = {"code": payload.get("code"), "message": payload.get("message")}
        elif event_type not in _KNOWN:
            logger.info(
                "unknown stream event ignored",
                extra={"provider": PROVIDER, "event_type": event_type},
            )

    def _part(self, payload: dict, *, create: dict) -> dict:
        item = self.output.setdefault(
            int(payload.get("output_index") or 0),
            {"type": "message", "role": "assistant", "content": []},
        )
        content = item.setdefault("content", [])
        position = int(payload.get("content_index") or 0)
        while len(content) <= position:
            content.append(copy.deepcopy(create))
        return content[position]

    def _response(self, broken: str | None) -> ProviderResponse:
        partial = [self.output[i] for i in sorted(self.output)]
        if self.final is not None:
            raw = self.final
            if not raw.get("output") and partial:
                raw = {**raw, "output": partial}
            return response_from_object(self.spec, self.raw_request, raw, self.secrets)
        raw = {**self.snapshot, "output": partial, "status": None}
        blocks, items = convert_output(partial)
        if self.error is not None:
            code = str(self.error.get("code") or "error")
            message = scrub(str(self.error.get("message") or ""), self.secrets)
            raw["error"] = {"code": code, "message": message}
            result = outcome("failed", "error", code, message)
        else:
            reason = broken or "connection_lost"
            result = outcome(
                "incomplete", reason, reason, "the stream ended before a terminal event"
            )
        return ProviderResponse(
            raw_request=self.raw_request,
            raw_response=raw,
            blocks=blocks,
            items=items,
            outcome=result,
            usage=usage(None, None),
            model=self.snapshot.get("model") or self.spec.model_id,
        )
