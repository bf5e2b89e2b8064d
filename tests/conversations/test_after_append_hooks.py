"""After-append hooks run once the append committed, in autocommit mode; a hook that
swallowed a database error cannot spoil the others' work, nor the append (on PostgreSQL
such an error inside a transaction would leave it refusing every statement)."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection

from conversations import services
from conversations.inputs import parse_message
from conversations.models import Conversation, Message
from tests.factories import ConversationFactory, UserFactory


def _failing_hook(conversation_id: int) -> None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT * FROM no_such_table_for_this_test")
    except DatabaseError:
        pass  # hooks never raise


def _titling_hook(conversation_id: int) -> None:
    Conversation.objects.filter(pk=conversation_id).update(title="seen by the hook")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("order", ["failing first", "failing last"])
def test_a_hook_that_swallowed_a_database_error_spoils_neither_the_others_nor_the_append(
    monkeypatch, settings, order
):
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "sync": False}
    hooks = [_failing_hook, _titling_hook]
    monkeypatch.setattr(
        services, "_after_append_hooks", hooks if order == "failing first" else hooks[::-1]
    )
    conversation = ConversationFactory(owner=UserFactory(username="hooked"))

    services.messages_append(
        conversation_id=conversation.pk,
        messages=[parse_message({"role": "user", "content": "hello"})],
    )

    assert Message.objects.filter(conversation=conversation).count() == 1
    conversation.refresh_from_db()
    assert conversation.title == "seen by the hook"
    # and the connection is usable afterwards
    assert Conversation.objects.filter(pk=conversation.pk).exists()


@pytest.mark.django_db(transaction=True)
def test_hooks_see_the_committed_messages(monkeypatch, settings):
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "sync": False}
    seen = []
    monkeypatch.setattr(
        services,
        "_after_append_hooks",
        [lambda cid: seen.append(Message.objects.filter(conversation_id=cid).count())],
    )
    conversation = ConversationFactory(owner=UserFactory(username="seer"))
    services.messages_append(
        conversation_id=conversation.pk,
        messages=[parse_message({"role": "user", "content": f"m{i}"}) for i in range(3)],
    )
    assert seen == [3]


@pytest.mark.django_db(transaction=True)
def test_a_hook_that_raises_is_logged_and_the_append_and_other_hooks_stand(monkeypatch, caplog):
    def raising_hook(conversation_id: int) -> None:
        raise RuntimeError("hook bug")

    monkeypatch.setattr(services, "_after_append_hooks", [raising_hook, _titling_hook])
    conversation = ConversationFactory(owner=UserFactory(username="raiser"))
    [appended] = services.messages_append(
        conversation_id=conversation.pk,
        messages=[parse_message({"role": "user", "content": "hello"})],
    )
    assert appended.created
    assert Message.objects.filter(conversation=conversation).count() == 1
    conversation.refresh_from_db()
    assert conversation.title == "seen by the hook"
    assert "after-append hook raising_hook failed" in caplog.text
