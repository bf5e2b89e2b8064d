"""Helpers of the provider tests."""

from __future__ import annotations

from providers import blocks
from providers.base import Finished, ProviderRequest


def make_request(spec, text="hello", *, system="be brief", tools=(), messages=None, **kw):
    return ProviderRequest(
        model=spec,
        system=system,
        messages=messages if messages is not None else [blocks.message("user", text)],
        tools=list(tools),
        max_output_tokens=kw.pop("max_output_tokens", 256),
        **kw,
    )


def finished(events: list):
    """The response of the last event, asserting the stream ended with Finished."""
    assert isinstance(events[-1], Finished)
    assert sum(isinstance(e, Finished) for e in events) == 1
    return events[-1].response


TOOL = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}
