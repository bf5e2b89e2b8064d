"""Rebuilding a provider response from journaled wire events (the provider side of SRD 13
recovery): the `RawEvent`s an adapter yielded, read back from a stream journal, are fed
through the same accumulator the live stream used, so a recovered step has the same
blocks, items and usage as the live one had at that point. A journal that ends before the
provider's terminal event gives an `incomplete` outcome (`connection_lost`).
"""

from __future__ import annotations

from collections.abc import Iterable

from providers import blocks as b
from providers.base import ProviderResponse, outcome, usage
from providers.config import ModelSpec


def response_from_raw_events(
    spec: ModelSpec, raw_request: dict, events: Iterable[tuple[str, dict]]
) -> ProviderResponse:
    """`events` as (event_type, payload) pairs in journal order."""
    if spec.provider == "anthropic":
        from providers.anthropic import _StreamReader as AnthropicReader

        return _replay(AnthropicReader(spec, raw_request, ()), events)
    if spec.provider == "openai":
        from providers.openai import _StreamReader as OpenAIReader

        return _replay(OpenAIReader(spec, raw_request, ()), events)
    if spec.provider == "openai_chat":
        from providers.openai_chat import _StreamReader as ChatReader

        return _replay(ChatReader(spec, raw_request, ()), events)
    return _replay_offline(spec, raw_request, events)


def _replay(reader, events: Iterable[tuple[str, dict]]) -> ProviderResponse:
    for event_type, payload in events:
        for _ in reader._apply(event_type, payload or {}):
            pass  # the typed events were for the live client
    return reader._response(None)


def _replay_offline(spec: ModelSpec, raw_request: dict, events) -> ProviderResponse:
    text, done, spent = [], False, usage()
    for event_type, payload in events:
        if event_type == "offline.text_delta":
            text.append(payload.get("text", ""))
        elif event_type == "offline.done":
            done, spent = True, payload.get("usage") or spent
    content = [b.text("".join(text))] if text else []
    result = (
        outcome("completed", "end_turn")
        if done
        else outcome("incomplete", "connection_lost", "connection_lost", "the stream was cut")
    )
    return ProviderResponse(
        raw_request=raw_request,
        raw_response={"provider": "offline", "content": content, "usage": spent},
        blocks=content,
        items=b.items_from_blocks(content),
        outcome=result,
        usage=spent,
        model=spec.model_id,
    )
