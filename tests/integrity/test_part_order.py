"""Issue 43, item 3: a message's parts are read in ordinal order by every reader, whatever
order the database returns rows in. The `part_reader_disorder` check runs each registered
reader over messages whose stored order differs from their ordinal order and names any
reader that hands the parts back out of order."""

from __future__ import annotations

import pytest
from django.db import connection

from conversations.inputs import parse_message
from conversations.services import messages_append
from integrity.checks import part_order
from integrity.checks.scope import Scope
from integrity.part_readers import PART_READERS
from security.redaction import jobs
from security.redaction.request import parse, scope_of_conversation
from tests.factories import ConversationFactory
from tests.support import suite


def _message(n: int, ordinals: list[int]) -> dict:
    """Parts listed in `ordinals`' order (an explicit ordinal is stored as given)."""
    return {
        "role": "assistant",
        "content": f"step {n}",
        "parts": [
            {"part_type": "text", "ordinal": o, "text_content": f"m{n} part {o} pin 4471zz{n}"}
            for o in ordinals
        ],
    }


def _conversation(owner, count: int, ordinals: list[int]):
    conversation = ConversationFactory(owner=owner)
    for start in range(0, count, 500):
        batch = range(start, min(count, start + 500))
        messages_append(
            conversation_id=conversation.pk,
            messages=[parse_message(_message(n, ordinals)) for n in batch],
        )
    return conversation


def test_every_reader_is_registered():
    assert {
        "conversations.messages_of",
        "conversations.serializers",
        "archive.forms_of",
        "compaction.assembly",
        "explorer.timeline",
        "memory.indexing",
        "importers.exporters",
        "security.redaction_forms",
    } <= set(PART_READERS)


def test_parts_stored_against_their_ordinal_order_are_read_in_ordinal_order(user, api):
    conversation = _conversation(user, 12, ordinals=[2, 0, 1])  # rows in 2, 0, 1 order

    problems = part_order.readers_out_of_order(Scope(conversation.pk))

    assert problems == []
    listed = api.get(f"/api/v1/conversations/{conversation.pk}/messages/").json()["results"]
    assert [[p["ordinal"] for p in m["parts"]] for m in listed] == [[0, 1, 2]] * 12


def test_the_check_names_a_reader_that_keeps_stored_order(user):
    conversation = _conversation(user, 3, ordinals=[1, 0])

    def stored_order(message_ids):
        from conversations.models import MessagePart

        found: dict[int, list[int]] = {}
        for message_id, ordinal in (
            MessagePart.objects.filter(message_id__in=message_ids)
            .order_by("pk")
            .values_list("message_id", "ordinal")
        ):
            found.setdefault(message_id, []).append(ordinal)
        return found

    PART_READERS["test.stored_order"] = stored_order
    try:
        problems = part_order.readers_out_of_order(Scope(conversation.pk))
    finally:
        del PART_READERS["test.stored_order"]

    assert {(p["reader"], p["conversation_id"]) for p in problems} == {
        ("test.stored_order", conversation.pk)
    }
    assert len(problems) == 3


@pytest.mark.postgres
def test_postgres_heap_order_after_updates_does_not_leak_into_any_reader(user, settings):
    """Parts stored in ordinal order; redaction rewrites each message's first part, whose
    new row version lands after the others in the heap. With sequential scans (what the
    planner picks on a large table) heap order is what an unordered read returns."""
    settings.LCM_SECRET_POLICY = "off"
    count = 3000 if suite.slow() else 40
    conversation = _conversation(user, count, ordinals=[0, 1, 2])
    request = parse({"literal": "part 0 pin"}, scope_of_conversation(conversation))
    row = jobs.start(request, via="command")
    assert row.steps["canonical"]["parts"] == count
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_indexscan = off")
        cursor.execute("SET LOCAL enable_bitmapscan = off")
        cursor.execute(
            "SELECT count(*) FROM (SELECT message_id, array_agg(ordinal) AS o "
            "FROM conversations_messagepart GROUP BY message_id) s "
            "WHERE o <> ARRAY[0, 1, 2]::integer[]"
        )
        # The heap holds (nearly) every message's parts as 1, 2, 0: a rewritten version may
        # land back in its page's free space when other writers run at the same time.
        assert cursor.fetchone()[0] >= count * 3 // 4

        problems = part_order.readers_out_of_order(Scope(conversation.pk), sample=count)

    assert problems == []  # mismatches: 0 for every reader
