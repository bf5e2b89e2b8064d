"""Session tools over MCP: `memory_search`, `pin_fact` (helper M's memory tools) and
`send_turn` (a user turn through the turn engine, answered when it has finished).

Inside a turn the memory tools work on that turn's branch. An MCP client is not inside a
turn, so each of these tools names its session (`session_id`, and optionally a
`branch_id`; default the session's active branch), reached through the turns app's owner
checkpoint: another user's session or branch is "not found".
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from core.api.errors import LcmError
from core.tool_result import ToolResult, to_json
from mcpserver.mcp_tool import McpTool

SESSION_PROPERTIES = {
    "session_id": {"type": "string", "description": "The session (GET /api/v1/sessions/)."},
    "branch_id": {
        "type": "string",
        "description": "A branch of that session; default: its active branch.",
    },
}

SEND_TURN = {
    "name": "send_turn",
    "description": (
        "Send a user message to a session of this server's turn engine and wait for the "
        "finished turn. Returns the turn id, its sequence number and phase, the answer's "
        "text, and the error if the turn failed. The session keeps its own memory: pinned "
        "facts, a state summary and everything said before."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            **SESSION_PROPERTIES,
            "content": {"type": "string", "description": "The user message."},
            "model": {"type": "string", "description": "A configured model name (optional)."},
        },
        "required": ["session_id", "content"],
    },
}


@dataclass(frozen=True)
class BranchView:
    """What the memory tools read of the turn they run in: its session and branch."""

    session: object
    branch: object


def _branch_for(user, arguments: dict):
    from retrieval.parsing import opt_str, req_str
    from turns.selectors import branch_for_turn, session_get_for_user

    session = session_get_for_user(user=user, session_id=req_str(arguments, "session_id"))
    branch = branch_for_turn(session=session, branch_id=opt_str(arguments, "branch_id", None))
    return session, branch


def _memory_tool(name: str) -> McpTool:
    from memory import tools as memory_tools

    definition = {d["name"]: d for d in memory_tools.definitions("enabled")}[name]
    schema = copy.deepcopy(definition["input_schema"])
    schema["properties"] = {**SESSION_PROPERTIES, **schema["properties"]}
    schema["required"] = ["session_id", *schema.get("required", [])]

    def run(*, user, arguments: dict) -> ToolResult:
        try:
            session, branch = _branch_for(user, arguments)
        except LcmError as error:
            return ToolResult.from_error(error)
        rest = {k: v for k, v in arguments.items() if k not in SESSION_PROPERTIES}
        return memory_tools.execute(name=name, input=rest, turn=BranchView(session, branch))

    return McpTool(name, definition["description"], schema, run)


def _send_turn(*, user, arguments: dict) -> ToolResult:
    from providers.blocks import rendered_text
    from retrieval.parsing import opt_str, req_str
    from turns import runner, services

    try:
        session, branch = _branch_for(user, arguments)
        turn = services.turn_accept(
            session=session,
            branch=branch,
            content=req_str(arguments, "content"),
            model=opt_str(arguments, "model", None),
        )
    except LcmError as error:
        return ToolResult.from_error(error)
    finished = runner.run_turn(turn_id=turn.id)
    message = finished.final_assistant_message or {}
    answer = message.get("rendered_text") or rendered_text(message.get("blocks") or [])
    return ToolResult(
        to_json(
            {
                "turn_id": finished.id,
                "session_id": session.pk,
                "branch_id": branch.pk,
                "turn_seq": finished.turn_seq,
                "phase": finished.phase,
                "answer": answer,
                "error": finished.error,
            }
        ),
        is_error=finished.phase == "failed",
    )


def session_tools() -> list[McpTool]:
    return [
        _memory_tool("memory_search"),
        _memory_tool("pin_fact"),
        McpTool(SEND_TURN["name"], SEND_TURN["description"], SEND_TURN["input_schema"], _send_turn),
    ]
