"""The product's memory tools offered to the upstream model of a drop-in request
(`X-LCM-Tools: memory`, or LCM_DROPIN_MEMORY_TOOLS): `lcm_grep`, `lcm_describe`,
`lcm_expand` and `memory_search`, run by the server as the caller, over the request's
conversation, in a bounded loop (LCM_TURN_MAX_STEPS model calls, as a turn).

The definitions are the turn engine's (memory/tools.py's registry); the calls go to the
same retrieval functions the turn engine's tools wrap (`retrieval.tools.tool_call_for_user`,
and `memory.recall.search_units` for `memory_search`), scoped to the drop-in conversation
instead of a branch.
A tool failure is an error result (core.tool_result.ToolResult) for the model to read,
never an exception.
"""

from __future__ import annotations

import logging

from django.conf import settings

from core.tool_result import ToolResult
from memory import tools as memory_tools
from retrieval.tools import tool_call_for_user

logger = logging.getLogger("lcm.dropin")

NAMES = ("lcm_grep", "lcm_describe", "lcm_expand", "memory_search")


def definitions() -> list[dict]:
    by_name = {d["name"]: d for d in memory_tools.definitions("enabled")}
    return [by_name[name] for name in NAMES if name in by_name]


def execute(*, user, conversation_id: int, name: str, input: dict) -> ToolResult:
    """The result of one call."""
    try:
        if not isinstance(input, dict):
            return ToolResult.error("tool input must be a JSON object")
        if name == "memory_search":
            return _memory_search(user, conversation_id, input)
        data = {k: v for k, v in input.items() if k != "all_conversations"}
        return tool_call_for_user(user=user, name=name, input=data, conversation_id=conversation_id)
    except Exception as error:  # noqa: BLE001 - a tool failure is the model's to read
        logger.exception("drop-in tool %s failed", name)
        return ToolResult.error(f"{name} failed: {type(error).__name__}: {error}")


def _memory_search(user, conversation_id: int, data: dict) -> ToolResult:
    # Search ranking (memory.recall), as the turn engine's memory_search: no similarity
    # threshold, recency boost or MMR, which serve turn injection (docs/memory.md).
    from memory.recall import items_from_units, search_units
    from memory.turn_retrieval import render_memory_artifact, scope_for_user

    query = str(data.get("query") or "").strip()
    if not query:
        return ToolResult.error("memory_search: query must not be empty")
    top_k = data.get("top_k", settings.LCM_RETRIEVAL_TOP_K)
    result = search_units(
        scope=scope_for_user(user=user, conversation_id=conversation_id), query=query, k=top_k
    )
    items = items_from_units(result.hits)
    if not items:
        return ToolResult("No stored memory matched this query.")
    return ToolResult("\n\n".join(render_memory_artifact(item) for item in items))
