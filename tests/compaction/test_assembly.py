from __future__ import annotations

import json

import pytest

from compaction.assembly import assemble_context
from compaction.engine import compact_conversation
from compaction.rendering import MISSING_RESULT
from conversations.inputs import parse_message
from conversations.services import messages_append
from tests.factories import append_messages


@pytest.fixture
def small_chunks(settings):
    settings.LCM_LEAF_CHUNK_TOKENS = 400
    settings.LCM_LEAF_TARGET_TOKENS = 120
    settings.LCM_CONDENSED_TARGET_TOKENS = 160
    settings.LCM_LEAF_MIN_FANOUT = 4
    settings.LCM_CONDENSED_MIN_FANOUT = 3
    return settings


def append(conversation, *payloads):
    return messages_append(
        conversation_id=conversation.pk, messages=[parse_message(p) for p in payloads]
    )


def test_anthropic_format_pairs_each_tool_result_right_after_its_call(conversation):
    append_messages(conversation, 9)

    out = assemble_context(conversation=conversation, fmt="anthropic", system="be brief")

    messages = out.output["messages"]
    assert out.output["system"] == "be brief"
    assert [m["role"] for m in messages] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    for index, message in enumerate(messages):
        for block in message["content"]:
            if block["type"] == "tool_use":
                following = messages[index + 1]["content"]
                assert following[0] == {
                    "type": "tool_result",
                    "tool_use_id": block["id"],
                    "content": following[0]["content"],
                }


def test_a_call_without_result_gets_a_synthetic_error_and_orphans_are_dropped(conversation):
    append(
        conversation,
        {"role": "user", "content": "go"},
        {
            "role": "tool",
            "content": "orphan",
            "parts": [{"part_type": "tool", "tool_call_id": "call_x", "tool_output": "orphan"}],
        },
        {
            "role": "assistant",
            "content": "",
            "parts": [
                {
                    "part_type": "tool",
                    "tool_call_id": "call_y",
                    "tool_name": "bash",
                    "tool_input": {"command": "ls"},
                }
            ],
        },
    )

    out = assemble_context(conversation=conversation, fmt="anthropic")

    assert out.output["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "call_y", "name": "bash", "input": {"command": "ls"}}
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "call_y",
                    "content": MISSING_RESULT,
                    "is_error": True,
                }
            ],
        },
    ]


def test_assembly_is_deterministic_and_fits_the_budget(conversation, small_chunks):
    append_messages(conversation, 200)
    compact_conversation(conversation_id=conversation.pk, mode="full")

    first = assemble_context(conversation=conversation, token_budget=300, fmt="openai")
    second = assemble_context(conversation=conversation, token_budget=300, fmt="openai")

    assert json.dumps(first.as_dict(), sort_keys=True, default=str) == json.dumps(
        second.as_dict(), sort_keys=True, default=str
    )
    assert first.token_estimate <= 300
    assert first.dropped
    assert [i["ordinal"] for i in first.dropped + first.items] == sorted(
        i["ordinal"] for i in first.dropped + first.items
    )
