"""The Anthropic Messages API adapter, through the official `anthropic` SDK.

Requests: top-level `system`, our blocks as content blocks (providers/anthropic_wire.py,
which also enforces the tool ordering rules), `tools` with `tool_choice` carrying
`disable_parallel_tool_use` from `[anthropic]` config, no sampling parameters (API version
2026-10-21 refuses them). Keys are read from the environment when the call is made.

Streaming reads the raw server-sent events of `client.messages.create(stream=True)`, so
every event, `ping` and unknown types included, reaches the journal as a `RawEvent`;
unknown types are logged and otherwise ignored. Blocks are accumulated by their `index`.
Stop reasons map to outcomes (see anthropic_wire.outcome_for_stop_reason); an `error`
event ends the stream `failed` with the error's type as code; a stream that ends without
`message_stop` (dropped connection) ends `incomplete` with reason `connection_lost`, and
keeps the blocks received so far.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Iterator

from core.lazy_import import lazy_import
from providers import blocks as b
from providers.anthropic_wire import (
    PROVIDER,
    our_block,
    outcome_for_stop_reason,
    wire_messages,
    wire_tools,
)
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
from providers.caching import anthropic_breakpoints, anthropic_min_tokens, read_cache_usage
from providers.calls import (
    scrub,
)
from providers.config import ModelSpec, engine_config
from providers.sdk_adapter import SdkAdapter, WireStreamReader, make_sdk_client

logger = logging.getLogger("providers")

# Loaded on first use: importing the SDK is most of a process's start-up (core/lazy_import.py).
anthropic = lazy_import("anthropic")

_KNOWN_EVENTS = {
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
    "ping",
    "error",
}


def make_client(**kwargs) -> anthropic.Anthropic:
    """An Anthropic client with the SDK's retries off (providers/sdk_adapter.py)."""
    return make_sdk_client(anthropic, **kwargs)


class AnthropicProvider(SdkAdapter):
    name = PROVIDER
    sdk = anthropic
    error_field = "type"

    # The request ---------------------------------------------------------------------------

    def build_params(self, request: ProviderRequest) -> dict:
        """The Messages API body for `request` (already redacted); raises ToolOrderingError."""
        params: dict = {"model": self.spec.model_id, "max_tokens": request.max_output_tokens}
        if request.system:
            params["system"] = request.system
        params["messages"] = wire_messages(request.messages)
        options = request.options
        if request.tools:
            params["tools"] = wire_tools(request.tools)
        if request.cache is not None and self.spec.cache == "auto":
            self.mark_cache(params, request)
        if request.tools:
            choice: dict = {"type": options.get("tool_choice", "auto")}
            if choice["type"] in ("auto", "any"):
                disable = engine_config().anthropic.disable_parallel_tool_use
                if "parallel_tool_calls" in options:
                    disable = not options["parallel_tool_calls"]
                if "disable_parallel_tool_use" in options:
                    disable = bool(options["disable_parallel_tool_use"])
                choice["disable_parallel_tool_use"] = disable
            params["tool_choice"] = choice
        if options.get("stop_sequences"):
            params["stop_sequences"] = list(options["stop_sequences"])
        return params

    def mark_cache(self, params: dict, request: ProviderRequest) -> None:
        """`cache_control` breakpoints at the stable boundaries of the request: the end of
        each stable system part (the tools before it are cached with it) and the last
        stable message; each only where the prefix reaches the model's minimum cacheable
        length, at most four (providers/caching.py)."""
        plan = request.cache
        parts = [(i, p) for i, p in enumerate(plan.system_parts) if p]
        split = bool(parts) and "\n\n".join(p for _, p in parts) == request.system
        if split:
            params["system"] = [{"type": "text", "text": p} for _, p in parts]
        system = params.get("system")
        system_blocks = (
            system
            if isinstance(system, list)
            else ([{"type": "text", "text": system}] if system else [])
        )
        tools = params.get("tools") or []
        messages = params["messages"]
        # The wire's blocks in prompt order, and where each stable boundary falls.
        blocks: list[tuple[str, dict]] = [("tool", t) for t in tools]
        blocks.extend(("system", blk) for blk in system_blocks)
        system_ends = [
            len(tools) + i
            for i in range(len(system_blocks))
            if not split or plan.marked_parts is None or parts[i][0] in plan.marked_parts
        ]
        stable_end = None
        # Request messages may merge on the wire only inside the current turn, so message
        # i of the plan is wire message i while i < stable_messages.
        for index, message in enumerate(messages):
            content = message["content"]
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
                message["content"] = content
            blocks.extend((message["role"], blk) for blk in content)
            if index == plan.stable_messages - 1:
                stable_end = len(blocks) - 1
        ends = list(system_ends)
        if len(messages) > plan.stable_messages + 1:
            # A tool loop's later step: its own earlier steps are stable for the next step
            # (the history's end stays marked too, so a long loop still finds it).
            if stable_end is not None:
                ends.append(stable_end)
            stable_end = len(blocks) - len(messages[-1]["content"]) - 1
        chosen = anthropic_breakpoints(
            blocks,
            system_ends=ends,
            stable_end=stable_end,
            minimum=anthropic_min_tokens(self.spec.model_id),
        )
        control = {"type": "ephemeral"}
        if self.spec.cache_ttl != "5m":
            control["ttl"] = self.spec.cache_ttl
        for index in chosen:
            blocks[index][1]["cache_control"] = dict(control)
        if system_blocks and not isinstance(system, list):
            params["system"] = system_blocks

    def create(self, client, params: dict, *, stream: bool):
        if stream:
            return client.messages.create(**params, stream=True, timeout=self.timeout)
        return client.messages.create(**params, timeout=self.timeout)

    def response_from_raw(self, raw_request: dict, raw: dict, secrets) -> ProviderResponse:
        return response_from_message(self.spec, raw_request, raw)

    def stream_reader(self, raw_request: dict, secrets) -> _StreamReader:
        return _StreamReader(self.spec, raw_request, secrets)


def response_from_message(spec: ModelSpec, raw_request: dict, raw: dict) -> ProviderResponse:
    content = [our_block(block) for block in raw.get("content") or []]
    status, reason, code = outcome_for_stop_reason(raw.get("stop_reason"))
    spent = raw.get("usage") or {}
    return ProviderResponse(
        raw_request=raw_request,
        raw_response=raw,
        blocks=content,
        items=b.items_from_blocks(content),
        outcome=outcome(status, reason, code, "the model refused" if code == "refusal" else None),
        usage=usage(
            spent.get("input_tokens"),
            spent.get("output_tokens"),
            **read_cache_usage(PROVIDER, spent),
        ),
        model=raw.get("model") or spec.model_id,
    )


class _StreamReader(WireStreamReader):
    """Accumulates one streamed message from its raw events."""

    provider = PROVIDER

    def __init__(self, spec: ModelSpec, raw_request: dict, secrets: tuple[str, ...]) -> None:
        self.spec = spec
        self.raw_request = raw_request
        self.secrets = secrets
        self.message: dict = {}
        self.blocks: dict[int, dict] = {}  # wire blocks by index
        self.json_parts: dict[int, list[str]] = {}
        self.stop_reason: str | None = None
        self.usage: dict = {}
        self.stopped = False
        self.error: dict | None = None

    def raw_events(self, response_stream):
        return anthropic.Stream.raw_events(response_stream.response)

    def done(self) -> bool:
        return bool(self.stopped or self.error)

    def _apply(self, event_type: str, payload: dict) -> Iterator[StreamEvent]:
        if event_type == "message_start":
            self.message = copy.deepcopy(payload.get("message") or {})
            self.usage.update(self.message.get("usage") or {})
        elif event_type == "content_block_start":
            index = int(payload.get("index", len(self.blocks)))
            block = copy.deepcopy(payload.get("content_block") or {})
            self.blocks[index] = block
            if block.get("type") == "tool_use":
                self.json_parts[index] = []
                yield ToolCallStart(index, block.get("id", ""), block.get("name", ""))
            elif block.get("type") == "text" and block.get("text"):
                yield TextDelta(index, block["text"])
        elif event_type == "content_block_delta":
            yield from self._delta(int(payload.get("index", 0)), payload.get("delta") or {})
        elif event_type == "content_block_stop":
            self._finish_block(int(payload.get("index", 0)))
        elif event_type == "message_delta":
            delta = payload.get("delta") or {}
            self.stop_reason = delta.get("stop_reason", self.stop_reason)
            if delta.get("stop_sequence") is not None:
                self.message["stop_sequence"] = delta["stop_sequence"]
            self.usage.update(
                {k: v for k, v in (payload.get("usage") or {}).items() if v is not None}
            )
        elif event_type == "message_stop":
            self.stopped = True
        elif event_type == "error":
            self.error = copy.deepcopy(payload.get("error") or {"type": "error"})
        elif event_type not in _KNOWN_EVENTS:
            logger.info(
                "unknown stream event ignored",
                extra={"provider": PROVIDER, "event_type": event_type},
            )

    def _delta(self, index: int, delta: dict) -> Iterator[StreamEvent]:
        block = self.blocks.setdefault(index, {"type": "text", "text": ""})
        kind = delta.get("type")
        if kind == "text_delta":
            block["text"] = block.get("text", "") + delta.get("text", "")
            yield TextDelta(index, delta.get("text", ""))
        elif kind == "input_json_delta":
            self.json_parts.setdefault(index, []).append(delta.get("partial_json", ""))
            yield ToolCallDelta(index, delta.get("partial_json", ""))
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
        elif kind == "signature_delta":
            block["signature"] = delta.get("signature")
        elif kind == "citations_delta":
            block.setdefault("citations", []).append(delta.get("citation"))
        else:
            logger.info(
                "unknown delta type ignored",
                extra={"provider": PROVIDER, "event_type": f"content_block_delta.{kind}"},
            )

    def _finish_block(self, index: int) -> None:
        parts = self.json_parts.pop(index, None)
        if parts is None or index not in self.blocks:
            return
        text = "".join(parts)
        try:
            self.blocks[index]["input"] = json.loads(text) if text.strip() else {}
        except json.JSONDecodeError:
            self.blocks[index]["input"] = {"_unparsed_arguments": text}

    def _response(self, broken: str | None) -> ProviderResponse:
        for index in list(self.json_parts):  # tool_use blocks cut short: keep what came
            self._finish_block(index)
        wire_blocks = [self.blocks[i] for i in sorted(self.blocks)]
        content = [our_block(block) for block in wire_blocks]
        raw = {
            **self.message,
            "content": wire_blocks,
            "stop_reason": self.stop_reason,
            "usage": self.usage,
        }
        if self.error:
            code = str(self.error.get("type") or "error")
            message = scrub(str(self.error.get("message") or ""), self.secrets)
            raw["error"] = {"type": code, "message": message}
            result = outcome("failed", "error", code, message)
        elif broken:
            result = outcome("incomplete", broken, broken, "the stream ended before message_stop")
        elif not self.stopped:
            result = outcome(
                "incomplete",
                "connection_lost",
                "connection_lost",
                "the stream ended before message_stop",
            )
        else:
            status, reason, code = outcome_for_stop_reason(self.stop_reason)
            result = outcome(
                status, reason, code, "the model refused" if code == "refusal" else None
            )
        return ProviderResponse(
            raw_request=self.raw_request,
            raw_response=raw,
            blocks=content,
            items=b.items_from_blocks(content),
            outcome=result,
            usage=usage(
                self.usage.get("input_tokens"),
                self.usage.get("output_tokens"),
                **read_cache_usage(PROVIDER, self.usage),
            ),
            model=self.message.get("model") or self.spec.model_id,
        )
