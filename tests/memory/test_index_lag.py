"""Indexing never leaves a conversation behind (issue 43): a job stops after its time and
queues what is left; a conversation whose job died is queued again by the worker's
reconciler; /metrics and the admin show how far indexing is behind."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from conversations.inputs import MessageInput
from conversations.services import messages_append
from memory.index_lag import indexing_lag, requeue_behind
from memory.indexing import index_conversation_messages
from memory.models import MessageIndexCursor
from tests.factories import UserFactory
from tests.memory.helpers import append


def _queued_jobs() -> list[int]:
    from django_q.models import OrmQ

    return [
        queued.task["args"][0]
        for queued in OrmQ.objects.all()
        if queued.func() == "memory.tasks.index_conversation"
    ]


def _behind(conversation, messages: int, *, dated: timedelta, since: timedelta):
    """`messages` appended with `created_at` `dated` ago, behind for `since`; the job that
    took them died (mark cleared, lease lapsed)."""
    now = timezone.now()
    messages_append(
        conversation_id=conversation.pk,
        messages=[
            MessageInput(
                role="user", content=f"note {i} on the cellar pump", created_at=now - dated
            )
            for i in range(messages)
        ],
    )
    MessageIndexCursor.objects.update_or_create(
        conversation=conversation,
        defaults={
            "queued_at": None,
            "lease_until": now - timedelta(seconds=1),
            "behind_since": now - since,
        },
    )


@pytest.mark.django_db(transaction=True)
def test_a_job_stops_after_its_time_and_queues_what_is_left(make_conversation, monkeypatch):
    conversation = make_conversation()
    append(conversation, *[f"line {i} of the boiler log" for i in range(6)])
    monkeypatch.setattr("memory.indexing._ROUND_TOKENS", 1)  # one message per round
    before = len(_queued_jobs())

    index_conversation_messages(conversation_id=conversation.pk, seconds=0)

    cursor = MessageIndexCursor.objects.get(conversation=conversation)
    assert cursor.last_seq == 1  # one round, then its time was up
    assert (cursor.lease_until, cursor.queued_at is not None) == (None, True)
    assert _queued_jobs()[before:] == [conversation.pk]


@pytest.mark.django_db(transaction=True)
def test_the_reconciler_queues_only_conversations_no_job_holds_or_waits_for(make_conversation):
    died, held, waiting, lost = (make_conversation() for _ in range(4))
    for conversation in (died, held, waiting, lost):
        _behind(conversation, 2, dated=timedelta(0), since=timedelta(0))
    now = timezone.now()
    MessageIndexCursor.objects.filter(conversation=held).update(
        lease_until=now + timedelta(seconds=30)
    )
    MessageIndexCursor.objects.filter(conversation=waiting).update(queued_at=now)
    MessageIndexCursor.objects.filter(conversation=lost).update(queued_at=now - timedelta(hours=1))
    before = len(_queued_jobs())

    assert requeue_behind() == 2
    assert sorted(_queued_jobs()[before:]) == sorted([died.pk, lost.pk])
    assert requeue_behind() == 0  # queued now: a second reconciler leaves them alone


@pytest.mark.django_db
def test_metrics_and_admin_show_how_far_indexing_is_behind(make_conversation):
    first, second = make_conversation(), make_conversation()
    # an import dated two days ago, behind for 5 minutes: its messages are 5 minutes old
    _behind(first, 3, dated=timedelta(days=2), since=timedelta(minutes=5))
    _behind(second, 2, dated=timedelta(minutes=1), since=timedelta(minutes=10))

    lag = indexing_lag()
    assert (lag.conversations, lag.messages) == (2, 5)
    assert 5 * 60 <= lag.oldest_seconds < 6 * 60
    body = Client().get("/metrics").content.decode()
    assert "lcm_memory_index_conversations_behind 2" in body
    assert "lcm_memory_index_messages_behind 5" in body
    assert "lcm_memory_index_oldest_unindexed_seconds 3" in body  # 300 s and some

    admin = Client()
    admin.force_login(UserFactory(username="root", is_staff=True, is_superuser=True))
    page = admin.get("/admin/memory/messageindexcursor/?behind=yes").content.decode()
    assert "2 conversation(s) behind, 5 message(s) not indexed" in page

    index_conversation_messages(conversation_id=first.pk)
    index_conversation_messages(conversation_id=second.pk)
    assert indexing_lag() == type(lag)(0, 0, 0.0)
    assert MessageIndexCursor.objects.filter(behind_since__isnull=False).count() == 0
