"""The turn engine sends large tool outputs of its `lcm` history as references (issue 31,
compaction/tail_outputs.py), with the same bytes in every later turn."""

from __future__ import annotations

from conversations.inputs import parse_message
from conversations.services import messages_append
from tests.turns.conftest import send
from turns import services
from turns.models import Branch, ContextStrategy

OUTPUT = "\n".join(f"line {k}: tests/test_mod_{k}.py::test_case PASSED" for k in range(150))


def _tool_exchange(conversation_id: int, n: int) -> None:
    call = f"turn_tool_{n}"
    messages_append(
        conversation_id=conversation_id,
        messages=[
            parse_message(p)
            for p in (
                {"role": "user", "content": f"run the suite {n}"},
                {
                    "role": "assistant",
                    "content": "",
                    "parts": [
                        {
                            "part_type": "tool",
                            "tool_call_id": call,
                            "tool_name": "bash",
                            "tool_input": {"command": "pytest"},
                        }
                    ],
                },
                {
                    "role": "tool",
                    "content": OUTPUT,
                    "parts": [{"part_type": "tool", "tool_call_id": call, "tool_output": OUTPUT}],
                },
                {"role": "assistant", "content": f"suite {n} passed"},
            )
        ],
    )


def _results(context: dict) -> dict[str, str]:
    def text(content) -> str:
        if isinstance(content, str):
            return content
        return "".join(c.get("text", "") for c in content)

    return {
        block["tool_use_id"]: text(block["content"])
        for message in context["history"]
        for block in message["blocks"]
        if block.get("type") == "tool_result"
    }


def test_the_turn_engine_sends_older_large_outputs_as_references(user, settings):
    settings.LCM_TAIL_TOOL_OUTPUT_MAX_TOKENS = 1000
    settings.LCM_TAIL_MAX_TOKENS = 4000
    session = services.session_create(
        owner=user, title="tools", context_strategy=ContextStrategy.LCM
    )
    conversation_id = Branch.objects.get(pk=session.active_branch_id).conversation_id
    for n in range(3):
        _tool_exchange(conversation_id, n)

    first = _results(send(session, "what failed?").context)
    second = _results(send(session, "and now?").context)

    assert set(first) == {"turn_tool_0", "turn_tool_1", "turn_tool_2"}
    assert first["turn_tool_2"] == OUTPUT
    for call in ("turn_tool_0", "turn_tool_1"):
        assert first[call].startswith("[LCM Tool Output: out_")
        assert "lcm_describe" in first[call]
    assert second == first  # the same bytes in the next turn
