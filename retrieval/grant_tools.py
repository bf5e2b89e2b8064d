"""The expansion sub-agent's tool dispatcher: `lcm_describe` and `lcm_expand`, run inside
its delegation grant (retrieval.services checks and charges every read)."""

from __future__ import annotations

from core.api.errors import InvalidInput, LcmError
from core.tool_result import ToolResult
from retrieval import services
from retrieval.models import DelegationGrant
from retrieval.parsing import req_str
from retrieval.tool_definitions import expand_args


def tool_call_for_grant(*, grant: DelegationGrant, name: str, input: dict) -> ToolResult:
    """Run one sub-agent tool call inside `grant`; anything else is refused."""
    try:
        if not isinstance(input, dict):
            raise InvalidInput("input must be a JSON object")
        if name == "lcm_describe":
            return ToolResult.from_data(
                services.grant_describe(grant=grant, item_id=req_str(input, "id"))
            )
        if name == "lcm_expand":
            return ToolResult.from_data(
                services.grant_expand(grant=grant, **expand_args(input)).as_dict()
            )
        raise InvalidInput(
            f"tool {name!r} is not available to an expansion sub-agent; "
            "use lcm_describe or lcm_expand"
        )
    except LcmError as error:
        return ToolResult.from_error(error)
