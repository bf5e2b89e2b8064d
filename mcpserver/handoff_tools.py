"""`lcm_handoff` over MCP: what a new session needs to continue earlier work, on demand
(docs/capture.md, "Hand-off"). The same hand-off the SessionStart hook gives at startup:
the last messages of the user's most recent session (in a project, by an agent, or a
session named by its id), said as what happened, each line with the messages it comes
from, within LCM_REPAIR_TOKEN_BUDGET tokens. So a session started in Codex can continue
one begun in Claude Code."""

from __future__ import annotations

from core.api.errors import LcmError, NotFound
from core.tool_result import ToolResult
from mcpserver.mcp_tool import McpTool

LCM_HANDOFF = {
    "name": "lcm_handoff",
    "description": (
        "Continue earlier work: the hand-off of your most recent coding-agent session (any "
        "agent: Claude Code, Codex, OpenCode, Gemini CLI), or of the one you name: what the "
        "user asked, which files changed how, which errors were fixed by what or are still "
        "open, what was decided and what is pending, each line with the messages (msg:N of "
        "its conversation) that lcm_grep / lcm_expand bring back whole. Filters: project "
        "(the directory the agent ran in), agent, or session (the agent's session id or a "
        "conversation id)."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "project": {"type": "string", "description": "The project directory."},
            "agent": {
                "type": "string",
                "description": "claude-code, codex, opencode or gemini.",
            },
            "session": {
                "type": "string",
                "description": "The agent's session id, or a conversation id.",
            },
        },
    },
}


def _conversation(user, arguments: dict):
    from conversations.models import Conversation
    from conversations.selectors import conversation_get_for_user
    from importers.repair import recent_session
    from retrieval.parsing import opt_str

    session = opt_str(arguments, "session", None)
    if session:
        if session.isdigit():
            return conversation_get_for_user(user=user, conversation_id=int(session))
        found = Conversation.objects.filter(owner=user, session_id=session).first()
        if found is None:
            raise NotFound(f"no session {session!r}")
        return found
    found = recent_session(
        owner=user,
        project=opt_str(arguments, "project", None) or "",
        agent=opt_str(arguments, "agent", None) or "",
    )
    if found is None:
        raise NotFound("no coding-agent session matches")
    return found


def _handoff(*, user, arguments: dict) -> ToolResult:
    from importers.repair import session_handoff

    try:
        conversation = _conversation(user, arguments)
    except LcmError as error:
        return ToolResult.from_error(error)
    addendum = session_handoff(conversation=conversation)
    origin = getattr(conversation, "origin", None)
    return ToolResult.from_data(
        {
            "conversation_id": conversation.pk,
            "session_id": conversation.session_id,
            "agent": origin.agent if origin else "",
            "project": origin.cwd if origin else "",
            "tokens": addendum.tokens,
            "handoff": addendum.text,
        }
    )


def handoff_tools() -> list[McpTool]:
    return [
        McpTool(
            LCM_HANDOFF["name"], LCM_HANDOFF["description"], LCM_HANDOFF["input_schema"], _handoff
        )
    ]
