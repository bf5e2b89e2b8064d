"""How an answer ended, once for every wire: each wire names the kinds in its own words
(`stop_reason`, `finish_reason`)."""

from __future__ import annotations

from providers.base import ProviderResponse


def answer_end(response: ProviderResponse) -> str:
    """ "tool" (paused on a tool call), "length", "refusal", "stop_sequence" or "end"."""
    status, reason = response.outcome["status"], response.outcome.get("reason")
    if status == "paused" and any(block["type"] == "tool_use" for block in response.blocks):
        return "tool"
    if status == "incomplete" and reason in ("max_tokens", "length"):
        return "length"
    if response.outcome.get("code") == "refusal":
        return "refusal"
    if reason == "stop_sequence":
        return "stop_sequence"
    return "end"
