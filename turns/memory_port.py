"""What the turn engine needs from semantic memory, which sits above it.

The memory app (docs/memory.md) stores its chunks against turns, so it is the higher
layer (docs/architecture.md); it registers its implementation here in its
`AppConfig.ready()`. Without it, turns run with no retrieval, no tools and no indexing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.tool_result import ToolResult


@dataclass(frozen=True)
class TurnMemory:
    # (turn=, query=, budget_tokens=, held=) -> a list of item dicts with a `stats`
    # attribute; `held` is what the context already holds, never retrieved again:
    # {"messages": {conversation_id: set of seqs}, "chunk_ids": set of chunk ids}
    retrieve_for_turn: Callable[..., Any]
    # (turn=, chunk_ids=) -> item dicts of the chunks a turn attached by hand
    chunks_by_id: Callable[..., list[dict]]
    # (turn_id=) -> chunk and embed a committed turn
    index_turn: Callable[..., Any]
    # (tools_mode) -> the tool definitions a turn offers the model
    tool_definitions: Callable[[str], list[dict]]
    # (name=, input=, turn=) -> a core.tool_result.ToolResult
    execute_tool: Callable[..., ToolResult]


_memory: TurnMemory | None = None


def register_turn_memory(memory: TurnMemory) -> None:
    global _memory
    _memory = memory


def turn_memory() -> TurnMemory | None:
    return _memory
