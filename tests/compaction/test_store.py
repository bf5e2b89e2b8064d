from __future__ import annotations

import pytest
from django.db import transaction
from django.utils import timezone

from compaction.planning import context_rows, leaf_candidate
from compaction.store import NewSummary, RangeChanged, apply_summary, summary_id_for
from compaction.tail_outputs import FreshTail
from conversations.models import ContextItem, Summary, SummaryMessage
from core import locks
from tests.factories import append_messages


def leaf_for(conversation, rows):
    now = timezone.now()
    ids = [r.message_id for r in rows]
    return NewSummary(
        id=summary_id_for(conversation_id=conversation.pk, kind="leaf", depth=0, sources=ids),
        conversation_id=conversation.pk,
        kind="leaf",
        depth=0,
        level="normal",
        content="a summary",
        token_count=3,
        earliest_at=now,
        latest_at=now,
        descendant_count=0,
        descendant_token_count=sum(r.token_count for r in rows),
        source_token_count=sum(r.token_count for r in rows),
        model="test",
        file_ids=[],
        message_ids=ids,
    )


def test_applying_the_same_planned_summary_twice_writes_it_once(conversation):
    append_messages(conversation, 10)
    rows = context_rows(conversation.pk)[:4]
    summary = leaf_for(conversation, rows)

    first = apply_summary(summary=summary, planned_item_ids=[r.item_id for r in rows])
    second = apply_summary(summary=summary, planned_item_ids=[r.item_id for r in rows])

    assert (first.already_applied, second.already_applied) == (False, True)
    assert Summary.objects.count() == 1
    assert SummaryMessage.objects.count() == 4
    assert ContextItem.objects.filter(conversation=conversation).count() == 7
    assert ContextItem.objects.get(summary_id=summary.id).ordinal == rows[0].ordinal


def test_a_range_that_changed_since_planning_is_refused_and_nothing_is_written(conversation):
    append_messages(conversation, 10)
    rows = context_rows(conversation.pk)
    apply_summary(
        summary=leaf_for(conversation, rows[2:4]), planned_item_ids=[r.item_id for r in rows[2:4]]
    )
    stale_plan = rows[:6]  # planned before the range [2:4] was compacted

    with pytest.raises(RangeChanged):
        apply_summary(
            summary=leaf_for(conversation, stale_plan),
            planned_item_ids=[r.item_id for r in stale_plan],
        )

    assert Summary.objects.count() == 1
    assert ContextItem.objects.filter(conversation=conversation).count() == 9


def test_a_planned_range_with_a_hole_is_refused(conversation):
    append_messages(conversation, 6)
    rows = context_rows(conversation.pk)
    holey = [rows[0], rows[2]]

    with pytest.raises(RangeChanged):
        apply_summary(
            summary=leaf_for(conversation, holey), planned_item_ids=[r.item_id for r in holey]
        )

    assert not Summary.objects.exists()
    assert ContextItem.objects.filter(conversation=conversation).count() == 6


@pytest.mark.django_db(transaction=True)
def test_locks_refuse_to_run_outside_a_transaction():
    with pytest.raises(RuntimeError, match="inside atomic"):
        locks.lock(locks.LockKind.COMPACTION, 1)


def test_lock_kinds_are_never_renumbered():
    assert {kind.name: int(kind) for kind in locks.LockKind} == {"COMPACTION": 1, "SESSION_JOIN": 2}


def test_the_leaf_candidate_is_capped_and_stops_before_the_tail(conversation, settings):
    append_messages(conversation, 30)
    rows = context_rows(conversation.pk)
    settings.LCM_FRESH_TAIL_COUNT = 8
    tail = FreshTail(conversation.token_budget).start(rows)

    candidate = leaf_candidate(rows, tail, chunk_tokens=100)

    assert tail == 22
    assert candidate.rows[0] == rows[0]
    assert candidate.source_tokens <= 100
    assert candidate.source_tokens + rows[len(candidate.rows)].token_count > 100
    assert leaf_candidate(rows, tail, chunk_tokens=10**6).rows == tuple(rows[:22])


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_try_lock_is_a_conflict_while_another_transaction_holds_it(conversation):
    import threading

    from core.api.errors import Conflict

    held, release = threading.Event(), threading.Event()

    def holder():
        from django.db import connection

        with transaction.atomic():
            locks.lock(locks.LockKind.COMPACTION, conversation.pk)
            held.set()
            release.wait(10)
        connection.close()

    thread = threading.Thread(target=holder)
    thread.start()
    held.wait(10)
    try:
        with pytest.raises(Conflict) as raised, transaction.atomic():
            locks.try_lock(locks.LockKind.COMPACTION, conversation.pk, retry_after=3)
        assert raised.value.retry_after == 3
        with transaction.atomic():
            locks.try_lock(locks.LockKind.COMPACTION, conversation.pk + 1)
    finally:
        release.set()
        thread.join()
    with transaction.atomic():
        locks.try_lock(locks.LockKind.COMPACTION, conversation.pk)
