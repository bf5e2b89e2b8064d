"""Concurrent writers on one conversation: seq and the context ordinal stay gap-free and
in step, and a re-sent external id is stored once, whoever wins the race.

Real threads, each with its own database connection, against a committed database
(`transactional_db`). The full-size proof runs on PostgreSQL; a smaller run checks that
SQLite's IMMEDIATE transactions serialise writers the same way.
"""

from __future__ import annotations

import threading
from functools import partial

import pytest
from django.db import connection

from conversations.inputs import parse_message
from conversations.models import ContextItem, Conversation, Message, MessagePart
from conversations.services import conversation_create, messages_append
from tests.factories import ConversationFactory, UserFactory
from tests.support.concurrent import run_together


def _run_in_threads(count: int, work) -> list:
    """work(0) .. work(count - 1) in threads started together; their results."""
    return run_together(*(partial(work, index) for index in range(count)), timeout=300)


def _hammer(threads: int, per_thread: int) -> None:
    conversation = ConversationFactory(owner=UserFactory(username="writer"))

    def append_many(worker: int) -> None:
        for i in range(per_thread):
            payload = {"role": "user", "content": f"worker {worker} message {i}"}
            if i % 10 == 0:  # some messages with parts, so parts race too
                payload["parts"] = [{"part_type": "text", "text_content": f"w{worker} p{i}"}]
            messages_append(conversation_id=conversation.pk, messages=[parse_message(payload)])

    _run_in_threads(threads, append_many)

    total = threads * per_thread
    rows = list(
        Message.objects.filter(conversation=conversation)
        .order_by("seq")
        .values_list("id", "seq", "content")
    )
    assert [seq for _, seq, _ in rows] == list(range(1, total + 1))
    items = list(
        ContextItem.objects.filter(conversation=conversation)
        .order_by("ordinal")
        .values_list("ordinal", "message_id", "item_type")
    )
    assert [ordinal for ordinal, _, _ in items] == list(range(1, total + 1))
    # The context follows seq order exactly: item n shows the message with seq n.
    assert [message_id for _, message_id, _ in items] == [pk for pk, _, _ in rows]
    assert {item_type for _, _, item_type in items} == {"message"}
    # Each writer's own messages keep the order it sent them in.
    for worker in range(threads):
        mine = [c for _, _, c in rows if c.startswith(f"worker {worker} ")]
        assert mine == [f"worker {worker} message {i}" for i in range(per_thread)]
    assert MessagePart.objects.filter(message__conversation=conversation).count() == threads * (
        (per_thread + 9) // 10
    )
    conversation.refresh_from_db()
    assert (conversation.last_seq, conversation.last_context_ordinal) == (total, total)


@pytest.mark.postgres
def test_eight_writers_append_1600_messages_with_gap_free_seqs(transactional_db):
    _hammer(threads=8, per_thread=200)


def test_concurrent_writers_append_gap_free_on_either_database(transactional_db):
    _hammer(threads=4, per_thread=25)


def _resend_race(threads: int) -> None:
    conversation = ConversationFactory(owner=UserFactory(username="resender"))
    _ = messages_append(
        conversation_id=conversation.pk,
        messages=[parse_message({"role": "user", "content": "before"})],
    )

    def resend(worker: int):
        [result] = messages_append(
            conversation_id=conversation.pk,
            messages=[
                parse_message(
                    {"role": "user", "content": f"from worker {worker}", "external_id": "ext-1"}
                )
            ],
        )
        return result.message.pk, result.message.seq, result.created

    results = _run_in_threads(threads, resend)
    stored = Message.objects.get(conversation=conversation, external_id="ext-1")
    assert {(pk, seq) for pk, seq, _ in results} == {(stored.pk, 2)}
    assert sum(created for _, _, created in results) == 1
    assert Message.objects.filter(conversation=conversation).count() == 2
    assert ContextItem.objects.filter(conversation=conversation).count() == 2


@pytest.mark.postgres
def test_concurrent_resends_of_one_external_id_store_it_once(transactional_db):
    _resend_race(threads=8)


def test_concurrent_resends_store_once_on_either_database(transactional_db):
    _resend_race(threads=4)


@pytest.mark.postgres
def test_concurrent_batches_with_overlapping_external_ids_store_each_once(transactional_db):
    conversation = ConversationFactory(owner=UserFactory(username="batcher"))

    def send_batch(worker: int):
        # Every worker sends ids 0..49 (shared) plus 10 of its own.
        batch = [
            {"role": "user", "content": f"shared {i}", "external_id": f"shared-{i}"}
            for i in range(50)
        ] + [
            {"role": "user", "content": f"own {worker}-{i}", "external_id": f"own-{worker}-{i}"}
            for i in range(10)
        ]
        results = messages_append(
            conversation_id=conversation.pk, messages=[parse_message(m) for m in batch]
        )
        return [(r.message.external_id, r.message.pk) for r in results]

    results = _run_in_threads(8, send_batch)
    stored = dict(
        Message.objects.filter(conversation=conversation).values_list("external_id", "id")
    )
    assert len(stored) == 50 + 8 * 10
    for answer in results:
        assert all(stored[ext] == pk for ext, pk in answer)
    seqs = sorted(Message.objects.filter(conversation=conversation).values_list("seq", flat=True))
    assert seqs == list(range(1, 131))


@pytest.mark.postgres
def test_concurrent_creates_of_one_session_make_one_conversation(transactional_db):
    owner = UserFactory(username="creator")

    def create(worker: int):
        conversation, created = conversation_create(owner=owner, session_id="same-session")
        return conversation.pk, created

    results = _run_in_threads(8, create)
    assert len({pk for pk, _ in results}) == 1
    assert sum(created for _, created in results) == 1
    assert Conversation.objects.filter(owner=owner).count() == 1


# --- a writer that cannot get the lock in time ----------------------------------------------


def _hold_the_conversation(conversation_id: int, locked: threading.Event, release: threading.Event):
    """In another connection, hold the conversation's write lock until released."""
    from django.db import transaction

    try:
        with transaction.atomic():  # BEGIN IMMEDIATE on SQLite: the write lock
            Conversation.objects.select_for_update().filter(pk=conversation_id).update(title="held")
            locked.set()
            release.wait(30)
    finally:
        connection.close()


def test_an_append_that_cannot_get_the_lock_is_a_409_to_retry(transactional_db):
    from rest_framework.test import APIClient

    from tests.conftest import token_client

    owner = UserFactory(username="waiter")
    conversation = ConversationFactory(owner=owner)
    client: APIClient = token_client(owner)
    locked, release = threading.Event(), threading.Event()
    holder = threading.Thread(
        target=_hold_the_conversation, args=(conversation.pk, locked, release)
    )
    holder.start()
    try:
        assert locked.wait(30)
        with connection.cursor() as cursor:  # give up after 300 ms instead of 20 s
            if connection.vendor == "sqlite":
                cursor.execute("PRAGMA busy_timeout = 300")
            else:
                cursor.execute("SET lock_timeout = '300ms'")
        response = client.post(
            f"/api/v1/conversations/{conversation.pk}/messages/",
            {"role": "user", "content": "hello"},
            format="json",
        )
        assert response.status_code == 409, response.content
        assert response.json() == {
            "code": "busy",
            "message": "another writer holds this data; retry shortly",
            "extra": {"retry_after": 1.0},
        }
        assert response["Retry-After"] == "1"
    finally:
        release.set()
        holder.join(30)
        # The 300 ms is a session setting, and closing hands a PostgreSQL connection back
        # to the pool as it is: a later test's thread would inherit it (seen: a concurrent
        # import failing with "lock timeout").
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("RESET lock_timeout")
        connection.close()
    assert Message.objects.filter(conversation=conversation).count() == 0
    retry = client.post(
        f"/api/v1/conversations/{conversation.pk}/messages/",
        {"role": "user", "content": "hello"},
        format="json",
    )
    assert (retry.status_code, retry.json()["seq"]) == (201, 1)
