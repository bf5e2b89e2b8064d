"""Each corruption, seeded with raw SQL, is named by exactly its check; a clean store is clean."""

from __future__ import annotations

import hashlib

import pytest
from django.core.files.base import ContentFile
from django.db import connection

from conversations.models import ContextItem, Conversation, Message
from core.token_estimate import estimate
from integrity.checks import CHECKS
from largefiles.models import LargeFile
from tests.factories import ConversationFactory, append_messages
from tests.integrity.seeding import double_estimate, problems, sql

pytestmark = pytest.mark.usefixtures("large_file_storage")


def _ids(rows, key):
    return sorted(row[key] for row in rows)


def test_a_clean_conversation_after_ingest_and_compaction_has_no_problems(small_compacted):
    conversation, _, _ = small_compacted
    assert problems(conversation.pk) == {}
    assert problems() == {}


def test_every_check_has_a_unique_name():
    names = [check.name for check in CHECKS]
    assert len(names) == len(set(names)) == 20


def test_it_names_a_message_that_fell_out_of_the_context(small_compacted):
    conversation, _, _ = small_compacted
    message = Message.objects.get(conversation=conversation, seq=17)
    sql("DELETE FROM conversations_contextitem WHERE message_id = %s", [message.pk])
    found = problems(conversation.pk)
    assert list(found) == ["unreachable_message"]
    assert found["unreachable_message"] == [
        {
            "conversation_id": conversation.pk,
            "message_id": message.pk,
            "seq": 17,
            "covering_summary_id": None,
        }
    ]


def test_it_names_messages_under_a_summary_that_left_the_context(small_compacted):
    conversation, leaves, _ = small_compacted
    sql("DELETE FROM conversations_contextitem WHERE summary_id = %s", [leaves[2].id])
    found = problems(conversation.pk)
    assert list(found) == ["unreachable_message"]
    assert [p["seq"] for p in found["unreachable_message"]] == [9, 10, 11, 12]
    # The leaf above them is lost too: putting it back is the better repair.
    assert {p["covering_summary_id"] for p in found["unreachable_message"]} == {leaves[2].id}


def test_it_names_the_topmost_lost_summary_above_lost_messages(small_compacted):
    conversation, leaves, top = small_compacted
    sql("DELETE FROM conversations_contextitem WHERE summary_id = %s", [top.id])
    found = problems(conversation.pk)
    assert list(found) == ["unreachable_message"]
    assert [p["seq"] for p in found["unreachable_message"]] == list(range(1, 9))
    assert {p["covering_summary_id"] for p in found["unreachable_message"]} == {top.id}


def test_it_names_a_summary_without_sources(small_compacted, rules_bypassed):
    rules_bypassed()
    conversation, leaves, _ = small_compacted
    sql(
        "INSERT INTO conversations_summary (id, conversation_id, kind, depth, level, content,"
        " token_count, earliest_at, latest_at, descendant_count, descendant_token_count,"
        " source_token_count, model, file_ids, created_at)"
        " SELECT 'sum_00000000000000aa', conversation_id, 'leaf', 0, 'normal', 'orphan', %s,"
        " earliest_at, latest_at, 0, 0, 0, '', file_ids, created_at"
        " FROM conversations_summary WHERE id = %s",
        [estimate("orphan"), leaves[0].id],
    )
    found = problems(conversation.pk)
    assert list(found) == ["summary_without_source"]
    assert found["summary_without_source"] == [
        {"conversation_id": conversation.pk, "summary_id": "sum_00000000000000aa", "kind": "leaf"}
    ]


def _copy_summary(source_id: str, new_id: str, *, kind: str, depth: int) -> None:
    sql(
        "INSERT INTO conversations_summary (id, conversation_id, kind, depth, level, content,"
        " token_count, earliest_at, latest_at, descendant_count, descendant_token_count,"
        " source_token_count, model, file_ids, created_at)"
        " SELECT %s, conversation_id, %s, %s, level, content, token_count, earliest_at,"
        " latest_at, 0, 0, 0, '', file_ids, created_at FROM conversations_summary WHERE id = %s",
        [new_id, kind, depth, source_id],
    )


def _edge(summary_id: str, parent_id: str, conversation_id: int, ordinal: int) -> None:
    sql(
        "INSERT INTO conversations_summaryparent (summary_id, parent_summary_id,"
        " conversation_id, ordinal) VALUES (%s, %s, %s, %s)",
        [summary_id, parent_id, conversation_id, ordinal],
    )


def test_it_names_a_condensed_summary_two_depths_above_its_source(small_compacted, rules_bypassed):
    rules_bypassed()
    conversation, leaves, _ = small_compacted
    _copy_summary(leaves[2].id, "sum_00000000000000bb", kind="condensed", depth=2)
    _edge("sum_00000000000000bb", leaves[2].id, conversation.pk, 0)
    found = problems(conversation.pk)
    assert list(found) == ["summary_depth_mismatch"]
    assert found["summary_depth_mismatch"] == [
        {
            "conversation_id": conversation.pk,
            "summary_id": "sum_00000000000000bb",
            "depth": 2,
            "source_id": leaves[2].id,
            "source_depth": 0,
            "problem": "source_depth",
        }
    ]


def test_it_names_a_cycle(small_compacted, rules_bypassed):
    rules_bypassed()
    conversation, _, top = small_compacted
    _copy_summary(top.id, "sum_00000000000000c1", kind="condensed", depth=1)
    _copy_summary(top.id, "sum_00000000000000c2", kind="condensed", depth=1)
    _edge("sum_00000000000000c1", "sum_00000000000000c2", conversation.pk, 0)
    _edge("sum_00000000000000c2", "sum_00000000000000c1", conversation.pk, 0)
    found = problems(conversation.pk)
    # A cycle cannot keep every depth one below the next, so depth is reported as well.
    assert sorted(found) == ["lineage_cycle", "summary_depth_mismatch"]
    assert _ids(found["lineage_cycle"], "summary_id") == [
        "sum_00000000000000c1",
        "sum_00000000000000c2",
    ]


def test_it_names_edges_listed_out_of_order(small_compacted, rules_bypassed):
    rules_bypassed()
    conversation, leaves, _ = small_compacted
    for ordinal, new in ((0, 1000), (1, 0), (1000, 1)):
        sql(
            "UPDATE conversations_summarymessage SET ordinal = %s"
            " WHERE summary_id = %s AND ordinal = %s",
            [new, leaves[2].id, ordinal],
        )
    found = problems(conversation.pk)
    assert list(found) == ["lineage_ordinal_disorder"]
    assert found["lineage_ordinal_disorder"] == [
        {
            "conversation_id": conversation.pk,
            "summary_id": leaves[2].id,
            "ordinal": 1,
            "source": "9",
            "edges": "message_edges",
        }
    ]


def test_it_names_a_context_item_that_shows_another_conversation(
    small_compacted, user, rules_bypassed
):
    conversation, _, _ = small_compacted
    other = ConversationFactory(owner=user)
    foreign = append_messages(other, 30)[-1]  # seq 30: after everything in `conversation`
    rules_bypassed()
    conversation.refresh_from_db()
    ordinal = conversation.last_context_ordinal + 1
    sql(
        "INSERT INTO conversations_contextitem (conversation_id, ordinal, item_type, message_id,"
        " token_count, created_at) VALUES (%s, %s, 'message', %s, %s, CURRENT_TIMESTAMP)",
        [conversation.pk, ordinal, foreign.pk, foreign.token_count],
    )
    sql(
        "UPDATE conversations_conversation SET last_context_ordinal = %s WHERE id = %s",
        [ordinal, conversation.pk],
    )
    found = problems(conversation.pk)
    assert list(found) == ["cross_conversation_reference"]
    [problem] = found["cross_conversation_reference"]
    assert problem["reference"] == "context_item.message"
    assert problem["target_id"] == str(foreign.pk)
    assert problem["target_conversation_id"] == other.pk


def test_it_names_a_context_item_pointing_at_a_missing_message(small_compacted, rules_bypassed):
    conversation, _, _ = small_compacted
    rules_bypassed()
    conversation.refresh_from_db()
    ordinal = conversation.last_context_ordinal + 1
    sql(
        "INSERT INTO conversations_contextitem (conversation_id, ordinal, item_type, message_id,"
        " token_count, created_at) VALUES (%s, %s, 'message', 987654321, 5, CURRENT_TIMESTAMP)",
        [conversation.pk, ordinal],
    )
    sql(
        "UPDATE conversations_conversation SET last_context_ordinal = %s WHERE id = %s",
        [ordinal, conversation.pk],
    )
    found = problems(conversation.pk)
    assert list(found) == ["context_item_missing_target"]
    [problem] = found["context_item_missing_target"]
    assert (problem["ordinal"], problem["message_id"]) == (ordinal, 987654321)


@pytest.mark.postgres  # SQLite keeps this UNIQUE in the table definition: it cannot be dropped
def test_it_names_duplicate_context_ordinals(small_compacted):
    conversation, _, _ = small_compacted
    sql("ALTER TABLE conversations_contextitem DROP CONSTRAINT context_item_ordinal_unique")
    message = Message.objects.get(conversation=conversation, seq=20)
    item = ContextItem.objects.get(message=message)
    sql("DELETE FROM conversations_contextitem WHERE id = %s", [item.pk])
    sql(
        "INSERT INTO conversations_contextitem (conversation_id, ordinal, item_type, message_id,"
        " token_count, created_at) VALUES (%s, %s, 'message', %s, %s, CURRENT_TIMESTAMP)",
        [conversation.pk, item.ordinal - 1, message.pk, message.token_count],
    )
    found = problems(conversation.pk)
    assert list(found) == ["context_ordinal_duplicate"]
    assert found["context_ordinal_duplicate"] == [
        {"conversation_id": conversation.pk, "ordinal": item.ordinal - 1, "items": 2}
    ]


def test_it_names_a_context_order_that_disagrees_with_seq_order(small_compacted):
    conversation, _, _ = small_compacted
    a = ContextItem.objects.get(message__conversation=conversation, message__seq=14)
    b = ContextItem.objects.get(message__conversation=conversation, message__seq=15)
    sql("UPDATE conversations_contextitem SET ordinal = -1 WHERE id = %s", [a.pk])
    sql("UPDATE conversations_contextitem SET ordinal = %s WHERE id = %s", [a.ordinal, b.pk])
    sql("UPDATE conversations_contextitem SET ordinal = %s WHERE id = %s", [b.ordinal, a.pk])
    found = problems(conversation.pk)
    assert list(found) == ["context_order_mismatch"]
    [problem] = found["context_order_mismatch"]
    assert (problem["first_seq"], problem["previous_seq"]) == (14, 15)


def test_it_names_a_gap_in_message_seqs(small_compacted, rules_bypassed):
    rules_bypassed()
    conversation, _, _ = small_compacted
    sql(
        "UPDATE conversations_message SET seq = 25 WHERE conversation_id = %s AND seq = 20",
        [conversation.pk],
    )
    sql("UPDATE conversations_conversation SET last_seq = 25 WHERE id = %s", [conversation.pk])
    found = problems(conversation.pk)
    assert list(found) == ["message_seq_gap"]
    assert found["message_seq_gap"] == [
        {"conversation_id": conversation.pk, "seq": 25, "previous_seq": 19, "problem": "gap"}
    ]


def test_it_names_a_counter_behind_its_rows(small_compacted):
    conversation, _, _ = small_compacted
    sql("UPDATE conversations_conversation SET last_seq = 19 WHERE id = %s", [conversation.pk])
    found = problems(conversation.pk)
    assert list(found) == ["conversation_counter_mismatch"]
    [problem] = found["conversation_counter_mismatch"]
    assert (problem["last_seq"], problem["max_seq"]) == (19, 20)


def test_it_names_a_file_id_that_names_no_file(small_compacted, rules_bypassed):
    rules_bypassed()
    conversation, leaves, _ = small_compacted
    as_json = "CAST(%s AS jsonb)" if connection.vendor == "postgresql" else "%s"
    sql(
        f"UPDATE conversations_message SET file_ids = {as_json}"
        " WHERE conversation_id = %s AND seq = 3",
        ['["file_00000000000000ff"]', conversation.pk],
    )
    sql(
        f"UPDATE conversations_summary SET file_ids = {as_json} WHERE id = %s",
        ['["file_00000000000000ee"]', leaves[1].pk],
    )
    found = problems(conversation.pk)
    assert list(found) == ["file_id_missing"]
    assert [(p["owner_kind"], p["file_id"]) for p in found["file_id_missing"]] == [
        ("message", "file_00000000000000ff"),
        ("summary", "file_00000000000000ee"),
    ]


def _stored_file(conversation, storage, data: bytes) -> LargeFile:
    key = f"{conversation.pk}/file_0123456789abcdef.txt"
    assert storage.save(key, ContentFile(data)) == key
    return LargeFile.objects.create(
        id="file_0123456789abcdef",
        conversation=conversation,
        file_name="notes.txt",
        mime_type="text/plain",
        byte_size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        storage_key=key,
    )


def test_a_stored_file_that_is_intact_is_clean(small_compacted, large_file_storage):
    conversation, _, _ = small_compacted
    _stored_file(conversation, large_file_storage, b"hello\n" * 100)
    assert problems(conversation.pk, file_grace_seconds=0) == {}


def test_it_names_a_missing_file_object(small_compacted, large_file_storage):
    conversation, _, _ = small_compacted
    row = _stored_file(conversation, large_file_storage, b"hello\n" * 100)
    large_file_storage.delete(row.storage_key)
    found = problems(conversation.pk)
    assert list(found) == ["file_object_missing"]
    assert found["file_object_missing"][0]["file_id"] == row.id


def test_it_names_a_file_object_with_a_wrong_hash(small_compacted, large_file_storage):
    conversation, _, _ = small_compacted
    row = _stored_file(conversation, large_file_storage, b"hello\n" * 100)
    large_file_storage.delete(row.storage_key)
    large_file_storage.save(row.storage_key, ContentFile(b"jello\n" * 100))
    found = problems(conversation.pk)
    assert list(found) == ["file_object_corrupt"]
    [problem] = found["file_object_corrupt"]
    assert problem["stored_bytes"] == problem["expected_bytes"] == 600
    assert problem["stored_sha256"] == hashlib.sha256(b"jello\n" * 100).hexdigest()


def test_it_names_a_stored_object_no_row_points_to(small_compacted, large_file_storage):
    conversation, _, _ = small_compacted
    key = f"{conversation.pk}/file_fedcba9876543210.txt"
    large_file_storage.save(key, ContentFile(b"left behind"))
    assert problems(conversation.pk) == {}  # young: may belong to an ingest in flight
    found = problems(conversation.pk, file_grace_seconds=0)
    assert found == {
        "file_object_unreferenced": [{"conversation_id": conversation.pk, "storage_key": key}]
    }


def test_it_names_token_counts_that_disagree_with_content(small_compacted, rules_bypassed):
    rules_bypassed()
    conversation, leaves, _ = small_compacted
    message = Message.objects.get(conversation=conversation, seq=19)  # a user turn: no parts
    sql(
        "UPDATE conversations_message SET token_count = token_count + 7 WHERE id = %s",
        [message.pk],
    )
    sql(
        "UPDATE conversations_summary SET token_count = token_count + 3 WHERE id = %s",
        [leaves[2].id],
    )
    found = problems(conversation.pk)
    assert list(found) == ["token_count_mismatch"]
    kinds = sorted(
        (p["kind"], p["id"], p["stored"] - p["expected"]) for p in found["token_count_mismatch"]
    )
    item = ContextItem.objects.get(message=message)
    leaf_item = ContextItem.objects.get(summary=leaves[2])
    assert kinds == sorted(
        [
            ("message", str(message.pk), 7),
            ("summary", leaves[2].id, 3),
            ("context_item", str(leaf_item.pk), -3),
            ("context_item", str(item.pk), -7),
        ]
    )


def test_a_scan_of_one_conversation_ignores_another_ones_problems(small_compacted, user):
    conversation, _, _ = small_compacted
    other = ConversationFactory(owner=user)
    append_messages(other, 3)
    Conversation.objects.filter(pk=other.pk).update(last_seq=1)
    assert problems(conversation.pk) == {}
    assert list(problems()) == ["conversation_counter_mismatch"]


def test_it_checks_non_ascii_messages_with_the_estimator(conversation, rules_bypassed):
    rules_bypassed()
    text = "我们决定把缓存过期时间改为九十秒 🚀 ok"
    [message] = append_messages(
        conversation, 1, payload=lambda i: {"role": "user", "content": text}
    )
    assert message.token_count == estimate(text)
    assert problems(conversation.pk) == {}
    sql("UPDATE conversations_message SET token_count = 3 WHERE id = %s", [message.pk])
    sql("UPDATE conversations_contextitem SET token_count = 3 WHERE message_id = %s", [message.pk])
    found = problems(conversation.pk)
    assert found == {
        "token_count_mismatch": [
            {
                "conversation_id": conversation.pk,
                "kind": "message",
                "id": str(message.pk),
                "seq": 1,
                "stored": 3,
                "expected": estimate(text),
            }
        ]
    }


def test_a_custom_estimator_is_used_for_every_message(small_compacted, settings):
    conversation, _, _ = small_compacted
    settings.LCM_TOKEN_ESTIMATOR = "tests.integrity.seeding.double_estimate"
    found = problems(conversation.pk)
    # The stand-in says about twice what was stored: a message without parts is off; one
    # with parts is off only when its parts did not already count more.
    expected = [
        str(m.pk)
        for m in Message.objects.filter(conversation=conversation).order_by("seq")
        if m.token_count < double_estimate(m.content)
        or (m.token_count != double_estimate(m.content) and not m.parts.exists())
    ]
    assert list(found) == ["token_count_mismatch"]
    flagged = [p["id"] for p in found["token_count_mismatch"] if p["kind"] == "message"]
    assert flagged == expected
    assert 7 <= len(expected) <= 20  # the user turns at least
    assert {p["kind"] for p in found["token_count_mismatch"]} == {"message", "summary"}
