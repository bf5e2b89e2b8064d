"""The MCP server (official `mcp` SDK, low-level `Server`): lists the registry's tools and
runs a call as the user the transport authenticated.

`user_for(ctx)` is the transport's answer to "who is calling": stdio binds one user at
start-up, Streamable HTTP reads the user its token middleware put on the request.
Tool code is synchronous Django ORM work, so it runs in a worker thread.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from typing import Any

import mcp_types as types
from asgiref.sync import sync_to_async
from django.db import close_old_connections
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from mcpserver.stdio_front import INSTRUCTIONS, SERVER_NAME
from mcpserver.tools import mcp_tools

__all__ = ["INSTRUCTIONS", "SERVER_NAME", "build_server"]


def _run_tool(user_id: int, name: str, arguments: dict) -> types.CallToolResult:
    from django.contrib.auth import get_user_model

    # Outside Django's request cycle: drop connections past CONN_MAX_AGE ourselves.
    close_old_connections()
    try:
        user = get_user_model().objects.get(pk=user_id, is_active=True)
        tool = mcp_tools().get(name)
        if tool is None:
            raise MCPError(types.INVALID_PARAMS, f"unknown tool {name!r}")
        result = tool.run(user=user, arguments=arguments)
    finally:
        close_old_connections()
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=result.text)],
        is_error=result.is_error,
    )


def _version() -> str:
    try:
        return importlib.metadata.version("lcm-server")
    except importlib.metadata.PackageNotFoundError:
        return ""


def _tools_result() -> types.ListToolsResult:
    return types.ListToolsResult(
        tools=[
            types.Tool(name=t.name, description=t.description, input_schema=t.input_schema)
            for t in mcp_tools().values()
        ]
    )


def listed_tools(result: types.ListToolsResult | None = None) -> list[dict]:
    """The tools list as the wire carries it (what stdio's early answer replays)."""
    dumped = (result or _tools_result()).model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped["tools"]


def build_server(
    *,
    user_id_for: Callable[[Any], int],
    on_tools_listed: Callable[[list[dict]], None] | None = None,
) -> Server:
    """An MCP server whose tool calls run as `user_id_for(ctx)`; `on_tools_listed` gets
    each tools list as sent (stdio keeps it for its next start's early answer)."""

    async def list_tools(ctx, params) -> types.ListToolsResult:
        result = _tools_result()
        if on_tools_listed is not None:
            on_tools_listed(listed_tools(result))
        return result

    async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        user_id = user_id_for(ctx)
        run = sync_to_async(_run_tool, thread_sensitive=True)
        return await run(user_id, params.name, dict(params.arguments or {}))

    return Server(
        SERVER_NAME,
        version=_version(),
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
