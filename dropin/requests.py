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
    # The agent's own session id when the client sends one (Claude Code: metadata.user_id).
    session: str | None = None
    # The client's JSON body, for a wire that reads more of it later (the Responses wire:
    # its answer's echoed fields, the stored response's input, the agent's session).
    body: dict | None = None
    # The whole request's token estimate, computed once (dropin.services.request_total).
    total_tokens: int | None = None


def merge_consecutive(messages: list[dict]) -> list[dict]:
    """Consecutive messages of one role become one (the Chat wire sends each tool result as
    its own message; ours holds them in one user message, results first). A message's
    `raw` (the client's own contents, when the wire keeps them) is a list: merged, it
    holds each merged message's content in order."""
    merged: list[dict] = []
    last = None
    for message in messages:
        role = message["role"]
        if role == last:
            merged[-1]["blocks"] = merged[-1]["blocks"] + message["blocks"]
            merged[-1].pop("memo", None)  # no longer one message's parse (dropin/memo.py)
            if "raw" in message:
                merged[-1]["raw"] = merged[-1]["raw"] + message["raw"]
        else:
            merged.append({**message, "blocks": list(message["blocks"])})
            last = role
    return merged


def for_translation(messages: list[dict]) -> list[dict]:
    """Messages for an upstream of another wire, which knows no system-role message inside
    the conversation: each becomes user text in place (then merged with its neighbours)."""
    if all(message["role"] != "system" for message in messages):
        return messages
    return merge_consecutive(
        [
            {"role": "user", "blocks": message["blocks"]}
            if message["role"] == "system"
            else message
            for message in messages
        ]
    )
