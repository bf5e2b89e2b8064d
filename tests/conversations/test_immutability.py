"""Canonical rows cannot be rewritten: the database refuses UPDATE on both backends."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction

from conversations.models import Message, MessagePart
from tests.factories import append_messages


@pytest.mark.parametrize(
    ("table", "column"),
    [("conversations_message", "content"), ("conversations_messagepart", "text_content")],
)
def test_the_database_refuses_to_rewrite_a_canonical_row(conversation, table, column):
    append_messages(conversation, 3)
    before = list(Message.objects.order_by("id").values_list("content", flat=True))
    with (
        pytest.raises(IntegrityError, match="immutable"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(f"UPDATE {table} SET {column} = 'rewritten'")
    assert list(Message.objects.order_by("id").values_list("content", flat=True)) == before
    assert not MessagePart.objects.filter(text_content="rewritten").exists()


def test_the_orm_cannot_save_a_changed_message_either(conversation):
    [message] = append_messages(conversation, 1)
    stored = Message.objects.get(pk=message.pk)
    stored.content = "edited"
    with pytest.raises(IntegrityError), transaction.atomic():
        stored.save()
    assert Message.objects.get(pk=message.pk).content != "edited"
