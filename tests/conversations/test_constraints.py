"""The database itself refuses rows that break the canonical store's rules.

Rows are written directly (ORM or raw SQL), bypassing the services, so these tests prove
the rules live in the database. Every refusal also checks that nothing was stored.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from conversations.models import (
    ContextItem,
    Conversation,
    Message,
    MessagePart,
    Summary,
    SummaryMessage,
    SummaryParent,
)
from largefiles.models import LargeFile
from security.hard_delete import hard_delete_permit
from tests.factories import ConversationFactory, UserFactory

NOW = timezone.now()


def _message(conversation, seq, **kwargs):
    fields = {
        "role": "user",
        "content": f"message {seq}",
        "token_count": 3,
        "created_at": NOW,
        **kwargs,
    }
    return Message.objects.create(conversation=conversation, seq=seq, **fields)


def _summary(conversation, suffix, *, kind="leaf", depth=0, **kwargs):
    fields = {
        "level": "normal",
        "content": f"summary {suffix}",
        "token_count": 5,
        "earliest_at": NOW - timedelta(minutes=1),
        "latest_at": NOW,
        "created_at": NOW,
        **kwargs,
    }
    return Summary.objects.create(
        id=f"sum_{suffix:0>16}", conversation=conversation, kind=kind, depth=depth, **fields
    )


def _refused(create) -> None:
    """`create()` must raise IntegrityError; the savepoint keeps the test transaction usable."""
    with pytest.raises(IntegrityError), transaction.atomic():
        create()


@pytest.fixture
def store(db):
    """Two conversations of different owners, each with messages and summaries."""
    first = ConversationFactory(owner=UserFactory(username="alice"))
    second = ConversationFactory(owner=UserFactory(username="bob"))
    return {
        "conv": first,
        "m1": _message(first, 1),
        "m2": _message(first, 2),
        "leaf": _summary(first, "a1"),
        "leaf2": _summary(first, "a2"),
        "condensed": _summary(first, "a3", kind="condensed", depth=1),
        "other": second,
        "other_message": _message(second, 1),
        "other_leaf": _summary(second, "b1"),
    }


# --- unique rules -----------------------------------------------------------------------


def test_it_refuses_a_second_message_with_the_same_seq(store):
    _refused(lambda: _message(store["conv"], 1, content="duplicate seq"))
    assert Message.objects.filter(conversation=store["conv"]).count() == 2
    assert not Message.objects.filter(content="duplicate seq").exists()


def test_the_same_seq_in_another_conversation_is_fine(store):
    _message(store["other"], 2)
    assert Message.objects.filter(conversation=store["other"]).count() == 2


def test_it_refuses_a_second_part_with_the_same_ordinal(store):
    MessagePart.objects.create(message=store["m1"], session_id="s", part_type="text", ordinal=0)
    _refused(
        lambda: MessagePart.objects.create(
            message=store["m1"], session_id="s", part_type="tool", ordinal=0
        )
    )
    assert list(MessagePart.objects.values_list("ordinal", "part_type")) == [(0, "text")]


def test_it_refuses_a_repeated_external_id_in_one_conversation(store):
    _message(store["conv"], 3, external_id="ext-1")
    _refused(lambda: _message(store["conv"], 4, external_id="ext-1"))
    assert list(
        Message.objects.filter(conversation=store["conv"], external_id="ext-1").values_list(
            "seq", flat=True
        )
    ) == [3]
    assert not Message.objects.filter(conversation=store["conv"], seq=4).exists()


def test_messages_without_external_id_and_the_same_id_elsewhere_are_fine(store):
    _message(store["conv"], 3, external_id=None)
    _message(store["conv"], 4, external_id=None)
    _message(store["conv"], 5, external_id="shared")
    _message(store["other"], 2, external_id="shared")
    assert Message.objects.filter(conversation=store["conv"], external_id__isnull=True).count() == 4
    assert Message.objects.filter(external_id="shared").count() == 2


def test_it_refuses_two_context_items_at_one_ordinal(store):
    ContextItem.objects.create(
        conversation=store["conv"],
        ordinal=1,
        item_type="message",
        message=store["m1"],
        token_count=3,
    )
    _refused(
        lambda: ContextItem.objects.create(
            conversation=store["conv"],
            ordinal=1,
            item_type="message",
            message=store["m2"],
            token_count=3,
        )
    )
    assert list(ContextItem.objects.values_list("message_id", flat=True)) == [store["m1"].pk]


# --- checked values ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("item_type", "with_message", "with_summary"),
    [
        ("message", True, True),  # both
        ("summary", True, True),
        ("message", False, False),  # neither
        ("summary", False, False),
        ("summary", True, False),  # wrong item_type for the reference
        ("message", False, True),
        ("file", True, False),  # not an item type
    ],
)
def test_a_context_item_must_reference_exactly_what_its_type_says(
    store, item_type, with_message, with_summary
):
    _refused(
        lambda: ContextItem.objects.create(
            conversation=store["conv"],
            ordinal=1,
            item_type=item_type,
            message=store["m1"] if with_message else None,
            summary=store["leaf"] if with_summary else None,
            token_count=3,
        )
    )
    assert ContextItem.objects.count() == 0


def test_a_well_formed_context_item_of_each_type_is_stored(store):
    ContextItem.objects.create(
        conversation=store["conv"],
        ordinal=1,
        item_type="message",
        message=store["m1"],
        token_count=3,
    )
    ContextItem.objects.create(
        conversation=store["conv"],
        ordinal=2,
        item_type="summary",
        summary=store["leaf"],
        token_count=5,
    )
    assert ContextItem.objects.count() == 2


def test_it_refuses_an_unknown_role(store):
    _refused(lambda: _message(store["conv"], 3, role="wizard"))
    assert not Message.objects.filter(seq=3).exists()


def test_it_refuses_a_seq_below_one(store):
    _refused(lambda: _message(store["conv"], 0))
    assert not Message.objects.filter(seq=0).exists()


def test_it_refuses_an_unknown_part_type(store):
    _refused(
        lambda: MessagePart.objects.create(
            message=store["m1"], session_id="s", part_type="hologram", ordinal=0
        )
    )
    assert MessagePart.objects.count() == 0


@pytest.mark.parametrize(
    ("kind", "depth", "level"),
    [
        ("digest", 0, "normal"),  # unknown kind
        ("leaf", 0, "frantic"),  # unknown level
        ("leaf", 1, "normal"),  # a leaf is always depth 0
        ("condensed", 0, "normal"),  # a condensed summary is depth 1 or more
    ],
)
def test_it_refuses_a_summary_with_bad_kind_depth_or_level(store, kind, depth, level):
    _refused(lambda: _summary(store["conv"], "bad", kind=kind, depth=depth, level=level))
    assert not Summary.objects.filter(id="sum_0000000000000bad").exists()


def test_it_stores_every_valid_summary_level_and_deep_condensed(store):
    _summary(store["conv"], "c1", level="aggressive")
    _summary(store["conv"], "c2", level="fallback")
    _summary(store["conv"], "c3", kind="condensed", depth=4)
    assert Summary.objects.filter(conversation=store["conv"]).count() == 6


def test_it_refuses_a_summary_whose_time_range_runs_backwards(store):
    _refused(
        lambda: _summary(store["conv"], "t1", earliest_at=NOW, latest_at=NOW - timedelta(seconds=1))
    )
    assert not Summary.objects.filter(id="sum_00000000000000t1").exists()


def test_it_refuses_a_summary_id_without_the_sum_prefix(store):
    _refused(
        lambda: Summary.objects.create(
            id="abc_1",
            conversation=store["conv"],
            kind="leaf",
            depth=0,
            content="x",
            token_count=1,
            earliest_at=NOW,
            latest_at=NOW,
            created_at=NOW,
        )
    )
    assert not Summary.objects.filter(id="abc_1").exists()


def test_it_refuses_a_summary_parent_self_edge(store):
    _refused(
        lambda: SummaryParent.objects.create(
            summary=store["condensed"],
            parent_summary=store["condensed"],
            conversation=store["conv"],
            ordinal=0,
        )
    )
    assert SummaryParent.objects.count() == 0


# --- same-conversation rules (composite FKs on PostgreSQL, triggers on SQLite) ----------


def test_it_refuses_a_summary_parent_edge_to_a_source_in_another_conversation(store):
    _refused(
        lambda: SummaryParent.objects.create(
            summary=store["condensed"],
            parent_summary=store["other_leaf"],
            conversation=store["conv"],
            ordinal=0,
        )
    )
    assert SummaryParent.objects.count() == 0


def test_it_refuses_a_summary_parent_edge_filed_under_another_conversation(store):
    _refused(
        lambda: SummaryParent.objects.create(
            summary=store["condensed"],
            parent_summary=store["leaf"],
            conversation=store["other"],
            ordinal=0,
        )
    )
    assert SummaryParent.objects.count() == 0


def test_it_refuses_a_summary_message_edge_to_a_message_in_another_conversation(store):
    _refused(
        lambda: SummaryMessage.objects.create(
            summary=store["leaf"],
            message=store["other_message"],
            conversation=store["conv"],
            ordinal=0,
        )
    )
    assert SummaryMessage.objects.count() == 0


def test_it_refuses_a_summary_message_edge_filed_under_another_conversation(store):
    _refused(
        lambda: SummaryMessage.objects.create(
            summary=store["leaf"], message=store["m1"], conversation=store["other"], ordinal=0
        )
    )
    assert SummaryMessage.objects.count() == 0


def test_it_refuses_a_context_item_pointing_at_another_conversations_message(store):
    _refused(
        lambda: ContextItem.objects.create(
            conversation=store["conv"],
            ordinal=1,
            item_type="message",
            message=store["other_message"],
            token_count=3,
        )
    )
    assert ContextItem.objects.count() == 0


def test_it_refuses_a_context_item_pointing_at_another_conversations_summary(store):
    _refused(
        lambda: ContextItem.objects.create(
            conversation=store["conv"],
            ordinal=1,
            item_type="summary",
            summary=store["other_leaf"],
            token_count=5,
        )
    )
    assert ContextItem.objects.count() == 0


def test_it_refuses_moving_a_context_item_into_another_conversation(store):
    item = ContextItem.objects.create(
        conversation=store["conv"],
        ordinal=1,
        item_type="message",
        message=store["m1"],
        token_count=3,
    )
    _refused(lambda: ContextItem.objects.filter(pk=item.pk).update(conversation=store["other"]))
    assert ContextItem.objects.get(pk=item.pk).conversation_id == store["conv"].pk


def test_lineage_inside_one_conversation_is_stored(store):
    SummaryMessage.objects.create(
        summary=store["leaf"], message=store["m1"], conversation=store["conv"], ordinal=0
    )
    SummaryParent.objects.create(
        summary=store["condensed"],
        parent_summary=store["leaf"],
        conversation=store["conv"],
        ordinal=0,
    )
    assert (SummaryMessage.objects.count(), SummaryParent.objects.count()) == (1, 1)


# --- ON DELETE RESTRICT -----------------------------------------------------------------
# On PostgreSQL the reference is checked at the DELETE; on SQLite the foreign keys are
# deferred and the commit refuses. A real transaction (transactional_db) covers both.


def _lineage_store():
    conv = ConversationFactory(owner=UserFactory(username="carol"))
    m1, m2, m3, m4 = (_message(conv, seq) for seq in (1, 2, 3, 4))
    leaf = _summary(conv, "l1")
    leaf2 = _summary(conv, "l2")
    condensed = _summary(conv, "c1", kind="condensed", depth=1)
    MessagePart.objects.create(message=m1, session_id="s", part_type="text", ordinal=0)
    SummaryMessage.objects.create(summary=leaf, message=m2, conversation=conv, ordinal=0)
    SummaryParent.objects.create(
        summary=condensed, parent_summary=leaf2, conversation=conv, ordinal=0
    )
    ContextItem.objects.create(
        conversation=conv, ordinal=1, item_type="message", message=m3, token_count=3
    )
    ContextItem.objects.create(
        conversation=conv, ordinal=2, item_type="summary", summary=condensed, token_count=5
    )
    return {
        "m1": m1,
        "m2": m2,
        "m3": m3,
        "m4": m4,
        "leaf": leaf,
        "leaf2": leaf2,
        "condensed": condensed,
    }


def _raw_delete(table: str, pk) -> None:
    """Under the hard-delete permit (security/hard_delete.py), so what refuses is the
    reference rules, not the DELETE ban on canonical rows (security migration 0002)."""
    with hard_delete_permit(), connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {table} WHERE id = %s", [pk])


@pytest.mark.parametrize(
    ("table", "key", "why"),
    [
        ("conversations_message", "m1", "it has a part"),
        ("conversations_message", "m2", "a leaf summary lists it as a source"),
        ("conversations_message", "m3", "a context item shows it"),
        ("conversations_summary", "leaf", "it links its source messages"),
        ("conversations_summary", "leaf2", "a condensed summary lists it as a source"),
        ("conversations_summary", "condensed", "a context item shows it and it has sources"),
    ],
)
def test_it_refuses_deleting_a_row_that_lineage_or_the_context_references(
    transactional_db, table, key, why
):
    rows = _lineage_store()
    counts = (Message.objects.count(), Summary.objects.count())
    with pytest.raises(IntegrityError), transaction.atomic():
        _raw_delete(table, rows[key].pk)
    assert (Message.objects.count(), Summary.objects.count()) == counts == (4, 3), why
    assert (MessagePart.objects.count(), ContextItem.objects.count()) == (1, 2)


def test_an_unreferenced_message_can_be_deleted_by_the_database(transactional_db):
    """The refusals above are about references, not a blanket ban the test cannot tell apart."""
    rows = _lineage_store()
    with transaction.atomic():
        _raw_delete("conversations_message", rows["m4"].pk)
    assert Message.objects.count() == 3


def test_a_conversation_budget_must_be_positive(db):
    owner = UserFactory(username="dave")
    _refused(lambda: Conversation.objects.create(owner=owner, session_id="s", token_budget=0))
    assert not Conversation.objects.filter(owner=owner).exists()


def test_one_owner_cannot_have_two_conversations_with_one_session_id(db):
    owner = UserFactory(username="erin")
    Conversation.objects.create(owner=owner, session_id="s", token_budget=10)
    _refused(lambda: Conversation.objects.create(owner=owner, session_id="s", token_budget=20))
    assert list(
        Conversation.objects.filter(owner=owner).values_list("token_budget", flat=True)
    ) == [10]


# --- more unique and checked rules ---------------------------------------------------------


def test_a_summary_lists_a_source_message_once_and_each_ordinal_once(store):
    SummaryMessage.objects.create(
        summary=store["leaf"], message=store["m1"], conversation=store["conv"], ordinal=0
    )
    _refused(
        lambda: SummaryMessage.objects.create(
            summary=store["leaf"], message=store["m1"], conversation=store["conv"], ordinal=1
        )
    )
    _refused(
        lambda: SummaryMessage.objects.create(
            summary=store["leaf"], message=store["m2"], conversation=store["conv"], ordinal=0
        )
    )
    assert list(SummaryMessage.objects.values_list("message_id", "ordinal")) == [
        (store["m1"].pk, 0)
    ]


def test_a_condensed_summary_lists_a_source_once_and_each_ordinal_once(store):
    SummaryParent.objects.create(
        summary=store["condensed"],
        parent_summary=store["leaf"],
        conversation=store["conv"],
        ordinal=0,
    )
    _refused(
        lambda: SummaryParent.objects.create(
            summary=store["condensed"],
            parent_summary=store["leaf"],
            conversation=store["conv"],
            ordinal=1,
        )
    )
    _refused(
        lambda: SummaryParent.objects.create(
            summary=store["condensed"],
            parent_summary=store["leaf2"],
            conversation=store["conv"],
            ordinal=0,
        )
    )
    assert list(SummaryParent.objects.values_list("parent_summary_id", "ordinal")) == [
        (store["leaf"].pk, 0)
    ]


def test_it_refuses_a_negative_token_count(store):
    _refused(lambda: _message(store["conv"], 3, token_count=-1))
    assert not Message.objects.filter(seq=3).exists()


def _large_file(conversation, file_id: str, sha: str) -> LargeFile:
    return LargeFile.objects.create(
        id=file_id,
        conversation=conversation,
        byte_size=10,
        sha256=sha,
        storage_key=f"key/{file_id}",
    )


def test_it_refuses_the_same_large_file_twice_in_one_conversation(store):
    _large_file(store["conv"], "file_0000000000000001", "a" * 64)
    _refused(lambda: _large_file(store["conv"], "file_0000000000000002", "a" * 64))
    _large_file(store["other"], "file_0000000000000003", "a" * 64)  # another conversation: fine
    assert sorted(LargeFile.objects.values_list("id", flat=True)) == [
        "file_0000000000000001",
        "file_0000000000000003",
    ]


def test_it_refuses_a_large_file_id_without_the_file_prefix(store):
    _refused(lambda: _large_file(store["conv"], "blob_1", "b" * 64))
    assert LargeFile.objects.count() == 0


def test_it_refuses_deleting_a_conversation_that_has_messages(transactional_db):
    conversation = ConversationFactory(owner=UserFactory(username="frank"))
    _message(conversation, 1)
    with pytest.raises(IntegrityError), transaction.atomic():
        _raw_delete("conversations_conversation", conversation.pk)
    assert Conversation.objects.filter(pk=conversation.pk).exists()
    assert Message.objects.filter(conversation=conversation).count() == 1


def _batch_with_a_bad_role_at_7():
    from conversations.inputs import MessageInput, PartInput

    batch = [
        MessageInput(role="user", content=f"m{i}", parts=(PartInput("text", None, {}),))
        for i in range(10)
    ]
    batch[7] = MessageInput(role="wizard", content="bad role, unchecked by the caller")
    return batch


def test_a_batch_the_database_refuses_midway_stores_nothing(db):
    """Service callers that skip `parse_message` still cannot write half a batch: the
    database refuses message 7 and the whole append rolls back."""
    from conversations.services import messages_append

    conversation = ConversationFactory(owner=UserFactory(username="gina"))
    with pytest.raises(Exception, match="message_role_valid|CHECK constraint failed"):
        messages_append(conversation_id=conversation.pk, messages=_batch_with_a_bad_role_at_7())
    conversation.refresh_from_db()
    assert (conversation.last_seq, conversation.last_context_ordinal) == (0, 0)
    assert Message.objects.filter(conversation=conversation).count() == 0
    assert MessagePart.objects.count() == 0
    assert ContextItem.objects.filter(conversation=conversation).count() == 0


def test_a_refused_bulk_insert_raises_djangos_integrity_error(db):
    from conversations.services import messages_append

    conversation = ConversationFactory(owner=UserFactory(username="hank"))
    with pytest.raises(IntegrityError):
        messages_append(conversation_id=conversation.pk, messages=_batch_with_a_bad_role_at_7())
