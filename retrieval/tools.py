"""The main agent's tool dispatcher: one tool call of `TOOL_DEFINITIONS`
(retrieval.tool_definitions) run as a user inside a conversation.

The sub-agent of an expansion has its own, narrower dispatcher (retrieval.grant_tools).
"""

from __future__ import annotations

from core.api.errors import InvalidInput, LcmError
from core.tool_result import ToolResult
from retrieval import selectors
from retrieval.expansion import ExpansionRequest, expansion_run
from retrieval.grep import GrepRequest, grep_for_user
from retrieval.parsing import opt_bool, opt_datetime, opt_int, opt_str, opt_str_list, req_str
from retrieval.tool_definitions import TOOL_NAMES, expand_args


def tool_call_for_user(*, user, name: str, input: dict, conversation_id: int) -> ToolResult:
    """Run one tool call as `user` inside `conversation_id` (checked by the caller).
    Problems with the tool input come back as an error result, as a model expects."""
    if name not in TOOL_NAMES:
        raise InvalidInput(
            f"unknown tool {name!r}; known: {', '.join(sorted(TOOL_NAMES))}",
            extra={"field": "name"},
        )
    if not isinstance(input, dict):
        raise InvalidInput("input must be a JSON object", extra={"field": "input"})
    try:
        if name == "lcm_describe":
            return ToolResult.from_data(
                selectors.describe_for_user(user=user, item_id=req_str(input, "id"))
            )
        if name == "lcm_expand":
            expanded = selectors.expand_for_user(user=user, **expand_args(input))
            return ToolResult.from_data(expanded.as_dict())
        if name == "lcm_grep":
            request = _grep_request(input, conversation_id)
            return ToolResult.from_data({"results": grep_for_user(user=user, request=request)})
        request = ExpansionRequest(
            prompt=req_str(input, "prompt"),
            summary_ids=opt_str_list(input, "summary_ids"),
            query=opt_str(input, "query", None),
            conversation_id=conversation_id,
            max_answer_tokens=opt_int(input, "max_answer_tokens", None),
            token_cap=opt_int(input, "token_cap", None),
        )
        return ToolResult.from_data(expansion_run(user=user, request=request))
    except LcmError as error:
        return ToolResult.from_error(error)


def _grep_request(data: dict, conversation_id: int) -> GrepRequest:
    agent, project = opt_str(data, "agent", None), opt_str(data, "project", None)
    # An agent or a project names other sessions: those search every conversation.
    everywhere = opt_bool(data, "all_conversations", False) or bool(agent or project)
    return GrepRequest(
        query=req_str(data, "query"),
        mode=opt_str(data, "mode", "full_text"),
        scope=opt_str(data, "scope", "both"),
        conversation_id=None if everywhere else conversation_id,
        since=opt_datetime(data, "since"),
        before=opt_datetime(data, "before"),
        limit=opt_int(data, "limit", 50),
        sort=opt_str(data, "sort", "recency"),
        ignore_case=opt_bool(data, "ignore_case", False),
        include_archived=opt_bool(data, "include_archived", False),
        agent=agent,
        project=project,
    )
