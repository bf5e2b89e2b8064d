from __future__ import annotations

import pytest

from conversations.inputs import parse_message
from conversations.models import ContextItem, Message, MessagePart
from conversations.services import messages_append
from core.api.errors import NotFound
from core.token_estimate import estimate_tokens
from tests.factories import append_messages


def _msg(**kwargs):
    return parse_message({"role": "user", "content": "hello", **kwargs})


def test_it_numbers_messages_gap_free_and_appends_a_context_item_each(conversation):
    append_messages(conversation, 5)
    append_messages(conversation, 3, start=5)
    seqs = list(
        Message.objects.filter(conversation=conversation)
        .order_by("seq")
        .values_list("seq", flat=True)
    )
    assert seqs == list(range(1, 9))
    items = list(ContextItem.objects.filter(conversation=conversation).order_by("ordinal"))
    assert [i.ordinal for i in items] == list(range(1, 9))
    assert [i.message.seq for i in items] == seqs
    assert all(i.item_type == "message" and i.summary_id is None for i in items)
    conversation.refresh_from_db()
    assert (conversation.last_seq, conversation.last_context_ordinal) == (8, 8)


def test_it_counts_tokens_at_write_time(conversation):
    [message] = append_messages(
        conversation, 1, payload=lambda i: {"role": "user", "content": "x" * 400}
    )
    stored = Message.objects.get(pk=message.pk)
    assert stored.token_count == 100
    assert ContextItem.objects.get(message=stored).token_count == 100


def test_it_stores_parts_with_assigned_ordinals(conversation):
    messages_append(
        conversation_id=conversation.pk,
        messages=[
            parse_message(
                {
                    "role": "assistant",
                    "content": "",
                    "parts": [
                        {"part_type": "text", "text_content": "Looking at the file."},
                        {
                            "part_type": "tool",
                            "ordinal": 5,
                            "tool_name": "read",
                            "tool_call_id": "c1",
                            "tool_input": {"path": "src/app.py"},
                            "tool_output": "print('hi')",
                        },
                        {"part_type": "reasoning", "text_content": "secret chain of thought"},
                    ],
                }
            )
        ],
    )
    message = Message.objects.get(conversation=conversation)
    parts = list(MessagePart.objects.filter(message=message).order_by("ordinal"))
    assert [(p.ordinal, p.part_type) for p in parts] == [(0, "text"), (5, "tool"), (6, "reasoning")]
    assert parts[1].tool_input == {"path": "src/app.py"}
    assert all(p.session_id == conversation.session_id for p in parts)
    # Content empty: derived from the parts, without the model's reasoning.
    assert (
        message.content
        == 'Looking at the file.\n[tool read c1] {"path": "src/app.py"}\nprint(\'hi\')'
    )
    assert "secret" not in message.content


def test_resending_an_external_id_returns_the_original_and_stores_nothing(conversation):
    [first] = messages_append(conversation_id=conversation.pk, messages=[_msg(external_id="ext-1")])
    [again] = messages_append(
        conversation_id=conversation.pk, messages=[_msg(content="changed", external_id="ext-1")]
    )
    assert first.created and not again.created
    assert again.message.pk == first.message.pk and again.message.content == "hello"
    assert Message.objects.filter(conversation=conversation).count() == 1
    assert ContextItem.objects.filter(conversation=conversation).count() == 1


def test_a_batch_mixing_known_and_new_external_ids_appends_only_the_new(conversation):
    messages_append(conversation_id=conversation.pk, messages=[_msg(external_id="a")])
    results = messages_append(
        conversation_id=conversation.pk,
        messages=[_msg(external_id="a"), _msg(external_id="b"), _msg()],
    )
    assert [r.created for r in results] == [False, True, True]
    assert [r.message.seq for r in results] == [1, 2, 3]


def test_appending_to_a_missing_conversation_is_not_found(db):
    with pytest.raises(NotFound):
        messages_append(conversation_id=999999, messages=[_msg()])
    assert Message.objects.count() == 0


def test_created_at_keeps_microseconds(conversation):
    from datetime import UTC, datetime

    when = datetime(2026, 3, 1, 12, 30, 45, 123456, tzinfo=UTC)
    [result] = messages_append(
        conversation_id=conversation.pk, messages=[_msg(created_at=when.isoformat())]
    )
    assert Message.objects.get(pk=result.message.pk).created_at == when


@pytest.mark.parametrize(
    ("text", "tokens"),
    [("", 0), ("abcd", 1), ("abcde", 2), ("我们决定把缓存", 7), ("😀😀", 4), ("hi 你好", 3)],
)
def test_token_estimator_is_cjk_and_emoji_aware(text, tokens):
    assert estimate_tokens(text) == tokens
