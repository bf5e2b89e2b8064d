"""The bounded fresh tail (issue 31): large tool outputs in the tail go as references."""

from __future__ import annotations

import json

import pytest

from compaction.assembly import assemble_context
from compaction.engine import compact_conversation
from compaction.tail_outputs import output_id
from conversations.inputs import parse_message
from conversations.models import MessagePart
from conversations.services import messages_append
from core.token_estimate import estimate
from retrieval.tools import tool_call_for_user
from tests.factories import append_messages

CAP = 3000
OUTPUT_MAX = 500


@pytest.fixture
def caps(settings):
    settings.LCM_TAIL_MAX_TOKENS = CAP
    settings.LCM_TAIL_TOOL_OUTPUT_MAX_TOKENS = OUTPUT_MAX
    settings.LCM_FRESH_TAIL_COUNT = 8


def _output(n: int) -> str:
    """A long tool output with a recognisable head and tail (~1,900 tokens)."""
    lines = [f"HEAD-{n} pytest session starts"]
    lines += [f"tests/test_mod_{n}_{k}.py::test_case_{k} PASSED [{k % 100}%]" for k in range(150)]
    lines.append(f"TAIL-{n} 150 passed in 12.{n}s")
    return "\n".join(lines)


def _tool_exchange(conversation, n: int) -> None:
    call = f"mycall_{n}"
    messages_append(
        conversation_id=conversation.pk,
        messages=[
            parse_message(p)
            for p in (
                {"role": "user", "content": f"run the tests of module {n}"},
                {
                    "role": "assistant",
                    "content": "",
                    "parts": [
                        {
                            "part_type": "tool",
                            "tool_call_id": call,
                            "tool_name": "bash",
                            "tool_input": {"command": f"pytest tests/mod_{n}"},
                        }
                    ],
                },
                {
                    "role": "tool",
                    "content": _output(n),
                    "parts": [
                        {"part_type": "tool", "tool_call_id": call, "tool_output": _output(n)}
                    ],
                },
            )
        ],
    )


def _results(messages: list[dict]) -> dict[str, str]:
    return {
        block["tool_use_id"]: block["content"]
        for message in messages
        for block in message["content"]
        if isinstance(message["content"], list) and block["type"] == "tool_result"
    }


def _rendered_tokens(messages: list[dict]) -> int:
    total = 0
    for message in messages:
        for block in message["content"]:
            body = block.get("text") or block.get("content") or json.dumps(block.get("input"))
            total += estimate(body) + 4
    return total


def test_a_full_compaction_leaves_a_tail_within_its_caps(conversation, caps, user):
    append_messages(conversation, 30)
    for n in range(3):
        _tool_exchange(conversation, n)
    compact_conversation(conversation_id=conversation.pk, mode="full")

    out = assemble_context(conversation=conversation, fmt="anthropic", split_summaries=True)

    messages = out.output["messages"]
    results = _results(messages)
    assert set(results) == {"mycall_0", "mycall_1", "mycall_2"}  # every call keeps its result
    assert results["mycall_2"] == _output(2)  # the newest fits the cap: verbatim
    for n in (0, 1):  # the older ones go as references, with head, tail and pointer
        ref = results[f"mycall_{n}"]
        assert ref.startswith(f"[LCM Tool Output: {output_id_of(n)} | tool | text/plain |")
        assert f"HEAD-{n}" in ref and f"TAIL-{n}" in ref
        assert f'lcm_describe {{"id": "{output_id_of(n)}"}}' in ref
        assert estimate(ref) <= OUTPUT_MAX
    assert _rendered_tokens(messages) <= CAP
    assert out.token_estimate <= estimate("\n".join(out.output["summaries"])) + CAP + 200
    # Nothing changed in the store, and the model can read each output back whole.
    for n in (0, 1):
        part = MessagePart.objects.get(tool_call_id=f"mycall_{n}", message__role="tool")
        assert part.tool_output == _output(n)
        read = tool_call_for_user(
            user=user,
            name="lcm_describe",
            input={"id": output_id_of(n)},
            conversation_id=conversation.pk,
        )
        assert not read.is_error
        assert json.loads(read.content)["content"] == _output(n)


def output_id_of(n: int) -> str:
    part = MessagePart.objects.get(tool_call_id=f"mycall_{n}", message__role="tool")
    return output_id(part.message_id, part.ordinal)


def test_an_output_is_shortened_at_most_once_and_never_sent_whole_again(conversation, caps):
    sent: dict[str, list[str]] = {}
    for n in range(12):
        _tool_exchange(conversation, n)
        out = assemble_context(conversation=conversation, fmt="anthropic", token_budget=60_000)
        messages = out.output["messages"]
        for call, content in _results(messages).items():
            seen = sent.setdefault(call, [content])
            if seen[-1] != content:
                seen.append(content)
        # the newest exchanges fit the cap (the cap counts stored tokens; framing aside)
        assert _rendered_tokens(messages[-9:]) <= CAP * 1.15
    for call, versions in sent.items():
        assert versions[0] == _output(int(call[7:]))  # first sent whole
        assert len(versions) <= 2  # then at most once shortened, never back
    assert sum(len(v) == 2 for v in sent.values()) == 11  # all but the newest


def test_the_neutral_and_openai_formats_shorten_the_same_outputs(conversation, caps):
    for n in range(3):
        _tool_exchange(conversation, n)

    neutral = assemble_context(conversation=conversation, fmt="neutral")
    openai = assemble_context(conversation=conversation, fmt="openai")

    texts = [m["content"] for m in neutral.output["messages"]]
    assert sum("[LCM Tool Output: out_" in t for t in texts) == 2
    assert _output(2) in texts
    tool_messages = [m["content"] for m in openai.output["messages"] if m["role"] == "tool"]
    assert [t.startswith("[LCM Tool Output:") for t in tool_messages] == [True, True, False]


def test_an_unknown_or_foreign_output_id_is_not_found(conversation, caps, user, other_user):
    _tool_exchange(conversation, 0)
    wanted = output_id_of(0)
    for who, ident in ((user, "out_999999_0"), (other_user, wanted)):
        read = tool_call_for_user(
            user=who, name="lcm_describe", input={"id": ident}, conversation_id=conversation.pk
        )
        assert read.is_error
