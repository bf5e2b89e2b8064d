"""The provider interface the turn engine, the librarian, compaction and expansion call.

`provider_for(spec).stream(request)` (the adapter table is `providers.registry`) yields every
wire event as `RawEvent` (for the journal), visible text as `TextDelta`, tool calls as
`ToolCallStart`/`ToolCallDelta`, and always ends with one `Finished` carrying the
`ProviderResponse`. Errors before the first byte raise `ProviderError`; errors after it end
the stream with a failed or incomplete outcome and keep the partial blocks.
`complete(request)` is the same call, drained. The types live here, below every adapter.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

from providers.caching import CachePlan
from providers.config import ModelSpec

STATUSES = ("completed", "incomplete", "paused", "failed", "cancelled")
PURPOSES = ("turn", "summary", "expansion", "librarian")


@dataclass
class ProviderRequest:
    model: ModelSpec
    system: str
    messages: list[dict]  # our messages (blocks); tool_results in user messages
    tools: list[dict]  # [{"name", "description", "input_schema"}]; [] when disabled
    max_output_tokens: int
    options: dict = field(default_factory=dict)  # parallel_tool_calls, store, ...
    purpose: str = "turn"  # "turn" | "summary" | "expansion" | "librarian"
    conversation_id: int | None = None  # for spend guard accounting
    cache: CachePlan | None = None  # the stable prefix (providers/caching.py); None: no marks


@dataclass
class ProviderResponse:
    raw_request: dict  # exactly what was sent (no key, no headers)
    raw_response: dict | None  # final message / response object as JSON
    blocks: list[dict]  # assistant message blocks (our shape)
    items: list[dict]  # normalized transcript items
    outcome: dict  # {"status", "reason", "code", "message"}
    usage: dict  # {"input_tokens", "output_tokens", "cache_read_input_tokens",
    # "cache_creation_input_tokens"}: int | None each, as the provider reported them
    model: str

    @property
    def status(self) -> str:
        return self.outcome["status"]

    def as_dict(self) -> dict:
        return {
            "raw_request": self.raw_request,
            "raw_response": self.raw_response,
            "blocks": self.blocks,
            "items": self.items,
            "outcome": self.outcome,
            "usage": self.usage,
            "model": self.model,
        }


@dataclass
class RawEvent:
    event_type: str
    payload: dict  # every wire event as sent, for the journal
    # Its data line exactly as it came, for a wire that relays it (not part of equality).
    data: str | None = field(default=None, compare=False, repr=False)


@dataclass
class TextDelta:
    index: int  # the block (Anthropic) or output item (OpenAI) it belongs to
    text: str


@dataclass
class ToolCallStart:
    index: int
    call_id: str
    name: str


@dataclass
class ToolCallDelta:
    index: int
    partial_json: str


@dataclass
class Finished:
    response: ProviderResponse  # always the last event


StreamEvent = RawEvent | TextDelta | ToolCallStart | ToolCallDelta | Finished


def outcome(
    status: str, reason: str | None = None, code: str | None = None, message: str | None = None
) -> dict:
    if status not in STATUSES:
        raise ValueError(f"outcome status must be one of {', '.join(STATUSES)}")
    return {"status": status, "reason": reason, "code": code, "message": message}


def usage(
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    cache_read_input_tokens: int | None = None,
    cache_creation_input_tokens: int | None = None,
) -> dict:
    """Neutral usage. `input_tokens` is as the provider counts it: Anthropic's excludes the
    cached tokens (read and written), OpenAI's includes the cached (read) ones."""
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_read_input_tokens": cache_read_input_tokens,
        "cache_creation_input_tokens": cache_creation_input_tokens,
    }


class Provider(Protocol):
    name: str

    def stream(self, request: ProviderRequest) -> Iterator[StreamEvent]: ...

    def complete(self, request: ProviderRequest) -> ProviderResponse: ...


def drain(events: Iterator[StreamEvent]) -> ProviderResponse:
    """The `Finished` response at the end of a stream (what `complete()` returns)."""
    finished = None
    for event in events:
        if isinstance(event, Finished):
            finished = event.response
    if finished is None:  # every adapter ends with Finished; a bug otherwise
        raise RuntimeError("provider stream ended without a Finished event")
    return finished
