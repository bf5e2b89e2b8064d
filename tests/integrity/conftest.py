"""Shared fixtures of the integrity tests."""

import pytest

from conversations.models import Message
from tests.factories import append_messages
from tests.integrity import dag
from tests.integrity.seeding import rules_bypassed, sql  # noqa: F401
from tests.largefile_support import large_file_storage  # noqa: F401


@pytest.fixture
def small_compacted(conversation):
    """20 messages, compacted by tests/integrity/dag.py: leaves over 1-4, 5-8, 9-12; the
    first two condensed; 13-20 raw."""
    append_messages(conversation, 20)
    leaves, top = dag.compact(conversation)
    return conversation, leaves, top


@pytest.fixture
def broken(conversation):
    """A compacted conversation whose raw message seq 15 fell out of the context."""
    append_messages(conversation, 20)
    dag.compact(conversation)
    message = Message.objects.get(conversation=conversation, seq=15)
    sql("DELETE FROM conversations_contextitem WHERE message_id = %s", [message.pk])
    return conversation, message
