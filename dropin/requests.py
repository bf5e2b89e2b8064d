"""A drop-in request after its wire was parsed: our blocks, whichever wire it came on."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class DropinRequest:
    wire: str  # "openai" | "anthropic"
    model: str
    system: str
    messages: list[dict]  # our messages (providers/blocks.py)
    tools: list[dict] = field(default_factory=list)  # {"name", "description", "input_schema"}
    max_tokens: int | None = None
    stream: bool = False
    include_usage: bool = False
    options: dict = field(default_factory=dict)  # tool_choice, stop_sequences


def merge_consecutive(messages: list[dict]) -> list[dict]:
    """Consecutive messages of one role become one (the Chat wire sends each tool result as
    its own message; ours holds them in one user message, results first)."""
    merged: list[dict] = []
    last = None
    for message in messages:
        role = message["role"]
        if role == last:
            merged[-1] = {**merged[-1], "blocks": merged[-1]["blocks"] + message["blocks"]}
        else:
            merged.append({"role": role, "blocks": list(message["blocks"])})
            last = role
    return merged
