"""`McpTool`, what every family of MCP tools builds (`mcpserver.tools` lists them all)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from core.tool_result import ToolResult


@dataclass(frozen=True)
class McpTool:
    name: str
    description: str
    input_schema: dict
    # run(user=..., arguments=...) -> ToolResult; runs in a worker thread (sync ORM).
    run: Callable[..., ToolResult]
