"""The tools the MCP server offers, as one registry.

The LCM tools are the very definitions and dispatcher of `/api/v1/tools/`
(`retrieval.tools`), run as the authenticated user through the same access checkpoint.
An MCP client is not inside a conversation the way a model turn is, so each LCM tool also
takes an optional `conversation_id`: lcm_grep searches every conversation of the user
without it, and lcm_expand_query then finds its summaries across all of them.

The session tools (memory_search, pin_fact, send_turn) are in `session_tools.py`, the
hand-off (lcm_handoff) in `handoff_tools.py`.
Adding a family of tools is one entry in `TOOL_FAMILIES`: a function returning
`McpTool`s (mcpserver.mcp_tool).
"""

from __future__ import annotations

import copy

from conversations.selectors import conversation_get_for_user
from core.api.errors import LcmError
from core.tool_result import ToolResult
from mcpserver.handoff_tools import handoff_tools
from mcpserver.mcp_tool import McpTool
from mcpserver.receipt_tools import receipt_tools
from mcpserver.session_tools import session_tools
from retrieval.parsing import opt_int
from retrieval.tool_definitions import TOOL_DEFINITIONS
from retrieval.tools import tool_call_for_user

CONVERSATION_ID_PROPERTY = {
    "type": "integer",
    "minimum": 1,
    "description": (
        "The conversation to work in (its id in /api/v1/conversations/). Optional: "
        "without it lcm_grep and lcm_expand_query look at every conversation of yours."
    ),
}


def _lcm_tool(definition: dict) -> McpTool:
    schema = copy.deepcopy(definition["input_schema"])
    schema["properties"]["conversation_id"] = CONVERSATION_ID_PROPERTY

    def run(*, user, arguments: dict) -> ToolResult:
        arguments = dict(arguments)
        try:
            conversation_id = opt_int(arguments, "conversation_id", None)
            if conversation_id is not None:
                # The same checkpoint as POST /api/v1/tools/call/: another user's is a 404.
                conversation_get_for_user(user=user, conversation_id=conversation_id)
        except LcmError as error:
            return ToolResult.from_error(error)
        arguments.pop("conversation_id", None)
        return tool_call_for_user(
            user=user, name=definition["name"], input=arguments, conversation_id=conversation_id
        )

    return McpTool(definition["name"], definition["description"], schema, run)


def lcm_tools() -> list[McpTool]:
    return [_lcm_tool(definition) for definition in TOOL_DEFINITIONS]


# One entry per family of tools, in listing order.
TOOL_FAMILIES = (lcm_tools, session_tools, receipt_tools, handoff_tools)


def mcp_tools() -> dict[str, McpTool]:
    """Every tool, by name, in listing order."""
    tools: dict[str, McpTool] = {}
    for factory in TOOL_FAMILIES:
        for tool in factory():
            tools[tool.name] = tool
    return tools
