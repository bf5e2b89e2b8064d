"""PostgreSQL's one-statement append (conversations/one_statement_append.py) stores exactly
what the general path stores, refuses what it refuses, and writes nothing when it fails."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from conversations.inputs import MessageInput, parse_message
from conversations.models import ContextItem, Conversation, Message, MessagePart
from conversations.services import messages_append
from core.api.errors import NotFound
from tests.factories import ConversationFactory, UserFactory

pytestmark = pytest.mark.postgres

EVERY_COLUMN = {
    "role": "assistant",
    "content": "",
    "parts": [
        {"part_type": "text", "text_content": "a text with ünïcödé and 漢字", "is_synthetic": True},
        {
            "part_type": "tool",
            "tool_call_id": "toolu_01",
            "tool_name": "read_file",
            "tool_status": "completed",
            "tool_input": {"path": "a.py", "lines": [1, 2], "deep": {"x": None}},
            "tool_output": "def f():\n    return 1\n",
            "tool_title": "read a.py",
            "is_ignored": False,
        },
        {"part_type": "patch", "patch_hash": "abc", "patch_files": ["a.py", "b.py"]},
        {
            "part_type": "step_finish",
            "step_reason": "stop",
            "step_cost": "0.00012345",
            "step_tokens_in": 120,
            "step_tokens_out": 7,
            "ordinal": 9,
        },
        {"part_type": "compaction", "compaction_auto": True, "metadata": {"k": [1, "x", None]}},
        {"part_type": "file", "file_mime": "text/plain", "file_name": "a.txt", "file_url": "u"},
    ],
}

PART_COLUMNS = [f.name for f in MessagePart._meta.fields if f.name not in ("id", "message")]


def _stored(message: Message) -> list[dict]:
    return list(
        MessagePart.objects.filter(message=message).order_by("ordinal").values(*PART_COLUMNS)
    )


@pytest.mark.django_db
def test_every_part_column_round_trips_as_through_the_general_path():
    conversation = ConversationFactory(owner=UserFactory(username="one"))
    single = parse_message(EVERY_COLUMN)
    with CaptureQueriesContext(connection) as queries:
        [one] = messages_append(conversation_id=conversation.pk, messages=[single])
    assert sum("WITH conv AS" in q["sql"] for q in queries.captured_queries) == 1
    # A batch of 40 takes the general path (COPY); its last message is the same input.
    batch = [parse_message({"role": "user", "content": f"filler {i}"}) for i in range(39)]
    *_, general = messages_append(
        conversation_id=conversation.pk, messages=[*batch, parse_message(EVERY_COLUMN)]
    )
    fast_parts, general_parts = _stored(one.message), _stored(general.message)
    for row in fast_parts + general_parts:
        row.pop("session_id")
    assert fast_parts == general_parts
    assert [p["ordinal"] for p in fast_parts] == [0, 1, 2, 9, 10, 11]
    assert fast_parts[4]["metadata"] == {"k": [1, "x", None]}
    assert fast_parts[3]["step_cost"] == Decimal("0.00012345")
    assert fast_parts[1]["tool_input"] == {"path": "a.py", "lines": [1, 2], "deep": {"x": None}}

    stored = Message.objects.get(pk=one.message.pk)
    assert (stored.seq, stored.content, stored.token_count) == (
        1,
        one.message.content,
        one.message.token_count,
    )
    assert stored.file_ids == []
    item = ContextItem.objects.get(message=stored)
    assert (item.ordinal, item.token_count) == (1, stored.token_count)
    conversation.refresh_from_db()
    assert (conversation.last_seq, conversation.last_context_ordinal) == (41, 41)


@pytest.mark.django_db
def test_several_messages_keep_their_order_and_numbering():
    conversation = ConversationFactory(owner=UserFactory(username="two"))
    messages_append(
        conversation_id=conversation.pk,
        messages=[parse_message({"role": "user", "content": "first"})],
    )
    results = messages_append(
        conversation_id=conversation.pk,
        messages=[parse_message({"role": "user", "content": f"m{i}"}) for i in range(5)],
    )
    assert [r.message.seq for r in results] == [2, 3, 4, 5, 6]
    stored = list(Message.objects.filter(conversation=conversation).order_by("seq"))
    assert [m.content for m in stored] == ["first", "m0", "m1", "m2", "m3", "m4"]
    assert [r.message.pk for r in results] == [m.pk for m in stored[1:]]
    # Server-assigned times: one per append, read under the lock, rising with seq.
    assert len({m.created_at for m in stored[1:]}) == 1
    assert stored[0].created_at < stored[1].created_at
    assert [r.message.created_at for r in results] == [m.created_at for m in stored[1:]]
    ordinals = list(
        ContextItem.objects.filter(conversation=conversation)
        .order_by("ordinal")
        .values_list("ordinal", "message__seq")
    )
    assert ordinals == [(i, i) for i in range(1, 7)]


@pytest.mark.django_db
def test_a_missing_conversation_is_not_found_and_writes_nothing():
    before = Message.objects.count()
    with pytest.raises(NotFound):
        messages_append(
            conversation_id=987_654_321,
            messages=[parse_message({"role": "user", "content": "lost?"})],
        )
    assert Message.objects.count() == before


@pytest.mark.django_db
def test_a_refused_message_rolls_back_the_whole_statement():
    conversation = ConversationFactory(owner=UserFactory(username="three"))
    good = parse_message({"role": "user", "content": "fine"})
    bad = MessageInput(role="robot", content="past the parser: the database refuses it")
    with pytest.raises(Exception, match="message_role_valid"):
        messages_append(conversation_id=conversation.pk, messages=[good, bad])
    conversation.refresh_from_db()
    assert (conversation.last_seq, conversation.last_context_ordinal) == (0, 0)
    assert not Message.objects.filter(conversation=conversation).exists()
    assert not MessagePart.objects.filter(message__conversation=conversation).exists()


@pytest.mark.django_db(transaction=True)
def test_it_refuses_to_run_inside_a_callers_transaction():
    conversation = Conversation.objects.create(
        owner=UserFactory(username="four"), session_id="s", token_budget=1000
    )
    with pytest.raises(RuntimeError, match="outside a transaction"), transaction.atomic():
        messages_append(
            conversation_id=conversation.pk,
            messages=[parse_message({"role": "user", "content": "x"})],
        )
    assert not Message.objects.filter(conversation=conversation).exists()
