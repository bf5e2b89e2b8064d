"""The memory tool loop (`X-LCM-Tools: memory`): call the model; while it calls only the
server's memory tools, run them and call it again (at most LCM_TURN_MAX_STEPS calls). The
client sees its own tool calls and the answer only: memory tool calls are taken out of
what it gets, and the internal steps are not stored."""

from __future__ import annotations

from dataclasses import replace

from django.conf import settings

from dropin import tools as dropin_tools
from dropin import upstream
from providers import blocks
from providers.base import ProviderRequest


def memory_loop(provider_request: ProviderRequest, *, user, conversation_id: int):
    """(the final response, how many model calls it took)."""
    messages = list(provider_request.messages)
    steps = 0
    while True:
        steps += 1
        response = upstream.complete(replace(provider_request, messages=messages))
        calls = [block for block in response.blocks if block["type"] == "tool_use"]
        ours = [call for call in calls if call["name"] in dropin_tools.NAMES]
        if not ours:
            return response, steps
        if len(ours) != len(calls) or steps >= settings.LCM_TURN_MAX_STEPS:
            response.blocks = [
                block
                for block in response.blocks
                if not (block["type"] == "tool_use" and block["name"] in dropin_tools.NAMES)
            ]
            return response, steps
        results = []
        for call in ours:
            outcome = dropin_tools.execute(
                user=user,
                conversation_id=conversation_id,
                name=call["name"],
                input=call.get("input") or {},
            )
            results.append(blocks.tool_result(call["id"], outcome.text, outcome.is_error))
        messages += [
            {"role": "assistant", "blocks": response.blocks},
            {"role": "user", "blocks": results},
        ]
