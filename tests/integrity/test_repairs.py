"""Plans propose, nothing changes until a plan is applied; applying fixes the context,
is recorded, scans again, and happens once."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from conversations.models import ContextItem, Conversation, Message
from core.api.errors import Conflict
from integrity.models import PlanStatus, RepairPlan, ScanMode, Trigger
from integrity.services import integrity_scan, repair_plan_apply
from tests.factories import append_messages
from tests.integrity import dag
from tests.integrity.seeding import problems, sql

pytestmark = pytest.mark.usefixtures("large_file_storage")


def _context(conversation) -> list[tuple[int, str]]:
    """(ordinal, what) in order: `m<seq>` or the summary id."""
    rows = ContextItem.objects.filter(conversation=conversation).order_by("ordinal")
    return [
        (item.ordinal, f"m{item.message.seq}" if item.message_id else item.summary_id)
        for item in rows.select_related("message")
    ]


def _plan(conversation) -> RepairPlan:
    report = integrity_scan(
        conversation_id=conversation.pk, mode=ScanMode.SCAN_AND_PLAN, trigger=Trigger.COMMAND
    )
    [plan] = report.plans.all()
    return plan


def test_a_plan_proposes_and_changes_nothing(small_compacted):
    conversation, _, _ = small_compacted
    message = Message.objects.get(conversation=conversation, seq=15)
    sql("DELETE FROM conversations_contextitem WHERE message_id = %s", [message.pk])
    before = _context(conversation)
    plan = _plan(conversation)
    assert plan.status == PlanStatus.PROPOSED
    assert plan.actions == [
        {
            "check": "unreachable_message",
            "automatic": True,
            "action": "reinsert_context_item",
            "message_id": message.pk,
            "seq": 15,
            "description": "put message seq 15 back into the active context, in seq order",
        }
    ]
    assert _context(conversation) == before
    assert list(problems(conversation.pk)) == ["unreachable_message"]


def test_a_clean_scan_with_plan_stores_no_plan(small_compacted):
    conversation, _, _ = small_compacted
    report = integrity_scan(
        conversation_id=conversation.pk, mode=ScanMode.SCAN_AND_PLAN, trigger=Trigger.COMMAND
    )
    assert report.total_problems == 0
    assert report.plans.count() == 0


def test_applying_reinserts_an_unreachable_message_in_seq_order(small_compacted, staff_user):
    conversation, leaves, top = small_compacted
    message = Message.objects.get(conversation=conversation, seq=15)
    sql("DELETE FROM conversations_contextitem WHERE message_id = %s", [message.pk])
    plan = _plan(conversation)
    applied = repair_plan_apply(plan_id=plan.pk, user=staff_user)
    assert applied.status == PlanStatus.APPLIED
    assert applied.applied_by == staff_user
    assert applied.applied_at is not None
    assert applied.outcome == [
        {
            "check": "unreachable_message",
            "automatic": True,
            "action": "reinsert_context_item",
            "message_id": message.pk,
            "seq": 15,
            "result": "done",
        }
    ]
    assert applied.after_report.total_problems == 0
    whats = [what for _, what in _context(conversation)]
    assert whats == [top.id, leaves[2].id, *[f"m{seq}" for seq in range(13, 21)]]
    assert problems(conversation.pk) == {}
    # The counters follow: the next append lands after the repaired context.
    [appended] = append_messages(conversation, 1, start=20)
    assert appended.seq == 21
    assert _context(conversation)[-1][1] == "m21"
    assert problems(conversation.pk) == {}


def test_applying_puts_back_a_summary_that_left_the_context(small_compacted):
    conversation, leaves, top = small_compacted
    sql("DELETE FROM conversations_contextitem WHERE summary_id = %s", [leaves[2].id])
    plan = _plan(conversation)
    assert [(a["action"], a.get("summary_id")) for a in plan.actions] == [
        ("reinsert_summary", leaves[2].id)
    ]
    applied = repair_plan_apply(plan_id=plan.pk)
    assert applied.outcome[0]["result"] == "done"
    whats = [what for _, what in _context(conversation)]
    assert whats == [top.id, leaves[2].id, *[f"m{seq}" for seq in range(13, 21)]]
    assert problems(conversation.pk) == {}


def test_a_summary_partly_back_in_the_context_returns_its_lost_messages_one_by_one(small_compacted):
    conversation, leaves, top = small_compacted
    item = ContextItem.objects.get(summary=leaves[2])
    sql("DELETE FROM conversations_contextitem WHERE id = %s", [item.pk])
    ten = Message.objects.get(conversation=conversation, seq=10)
    sql(
        "INSERT INTO conversations_contextitem (conversation_id, ordinal, item_type, message_id,"
        " token_count, created_at) VALUES (%s, %s, 'message', %s, %s, CURRENT_TIMESTAMP)",
        [conversation.pk, item.ordinal + 1, ten.pk, ten.token_count],
    )
    plan = _plan(conversation)
    assert [a["message_ids"] for a in plan.actions] == [
        [Message.objects.get(conversation=conversation, seq=s).pk for s in (9, 11, 12)]
    ]
    applied = repair_plan_apply(plan_id=plan.pk)
    assert applied.outcome[0]["result"] == "skipped"
    whats = [what for _, what in _context(conversation)]
    assert whats == [top.id, *[f"m{seq}" for seq in range(9, 21)]]
    assert problems(conversation.pk) == {}


def test_applying_puts_a_disordered_context_back_in_order(small_compacted):
    conversation, leaves, top = small_compacted
    a = ContextItem.objects.get(message__conversation=conversation, message__seq=14)
    b = ContextItem.objects.get(message__conversation=conversation, message__seq=15)
    sql("UPDATE conversations_contextitem SET ordinal = -1 WHERE id = %s", [a.pk])
    sql("UPDATE conversations_contextitem SET ordinal = %s WHERE id = %s", [a.ordinal, b.pk])
    sql("UPDATE conversations_contextitem SET ordinal = %s WHERE id = %s", [b.ordinal, a.pk])
    plan = repair_plan_apply(plan_id=_plan(conversation).pk)
    assert plan.after_report.total_problems == 0
    whats = [what for _, what in _context(conversation)]
    assert whats == [top.id, leaves[2].id, *[f"m{seq}" for seq in range(13, 21)]]


def test_applying_recomputes_a_counter_and_a_context_item_copy(small_compacted):
    conversation, _, _ = small_compacted
    sql("UPDATE conversations_conversation SET last_seq = 17 WHERE id = %s", [conversation.pk])
    item = ContextItem.objects.get(message__conversation=conversation, message__seq=20)
    sql("UPDATE conversations_contextitem SET token_count = 1 WHERE id = %s", [item.pk])
    plan = _plan(conversation)
    assert [a["action"] for a in plan.actions] == [
        "recompute_context_item_tokens",
        "recompute_counters",
    ]
    repair_plan_apply(plan_id=plan.pk)
    assert Conversation.objects.get(pk=conversation.pk).last_seq == 20
    item.refresh_from_db()
    assert item.token_count == item.message.token_count
    assert problems(conversation.pk) == {}


def test_lineage_problems_are_left_for_a_person(small_compacted, rules_bypassed):
    rules_bypassed()
    conversation, leaves, _ = small_compacted
    sql(
        "UPDATE conversations_summary SET token_count = token_count + 3 WHERE id = %s",
        [leaves[0].id],
    )
    plan = _plan(conversation)
    assert [(a["action"], a["automatic"]) for a in plan.actions] == [("review", False)]
    applied = repair_plan_apply(plan_id=plan.pk)
    assert applied.outcome[0]["result"] == "skipped"
    assert applied.after_report.total_problems == 1
    # The canonical row was not touched.
    leaves[0].refresh_from_db()
    assert leaves[0].token_count != 0


def test_a_plan_applies_only_once(small_compacted):
    conversation, _, _ = small_compacted
    sql("UPDATE conversations_conversation SET last_seq = 17 WHERE id = %s", [conversation.pk])
    plan = _plan(conversation)
    repair_plan_apply(plan_id=plan.pk)
    with pytest.raises(Conflict) as raised:
        repair_plan_apply(plan_id=plan.pk)
    assert raised.value.extra["status"] == "applied"
    plan.refresh_from_db()
    assert plan.status == PlanStatus.APPLIED


def test_a_plan_that_is_no_longer_needed_skips_its_actions(small_compacted):
    conversation, _, _ = small_compacted
    message = Message.objects.get(conversation=conversation, seq=15)
    sql("DELETE FROM conversations_contextitem WHERE message_id = %s", [message.pk])
    first, second = _plan(conversation), _plan(conversation)
    repair_plan_apply(plan_id=first.pk)
    applied = repair_plan_apply(plan_id=second.pk)
    assert applied.outcome[0]["result"] == "skipped"
    assert applied.outcome[0]["reason"] == "already reachable"
    assert ContextItem.objects.filter(message=message).count() == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_applying_while_others_append_loses_nothing(user, large_file_storage):
    """Appends and a repair serialize on the conversation row: no append is lost, no
    ordinal collides, and the store is clean after."""
    conversation = Conversation.objects.create(owner=user, session_id="race", token_budget=1000)
    append_messages(conversation, 20)
    leaves, top = dag.compact(conversation)
    message = Message.objects.get(conversation=conversation, seq=15)
    sql("DELETE FROM conversations_contextitem WHERE message_id = %s", [message.pk])
    plan = _plan(conversation)
    errors: list[BaseException] = []

    def writer(start: int) -> None:
        try:
            for i in range(10):
                append_messages(conversation, 3, start=start + i * 3)
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(100 + k * 100,)) for k in range(3)]
    for thread in threads:
        thread.start()
    applied = repair_plan_apply(plan_id=plan.pk)
    for thread in threads:
        thread.join()
    assert errors == []
    assert applied.status == PlanStatus.APPLIED
    assert Message.objects.filter(conversation=conversation).count() == 20 + 90
    assert problems(conversation.pk) == {}


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_repairs_appends_and_compaction_at_once_leave_a_clean_store(
    user, large_file_storage, settings
):
    """Writers append, a sweeper compacts, and plans are applied, all at once: every apply
    either happens whole or is a retryable conflict, and the store ends clean."""
    from compaction.engine import compact_conversation
    from compaction.summarizers import DeterministicSummarizer

    settings.LCM_LEAF_CHUNK_TOKENS = 256
    settings.LCM_LEAF_MIN_FANOUT = 2
    settings.LCM_CONDENSED_MIN_FANOUT = 2
    settings.LCM_FRESH_TAIL_COUNT = 4
    conversation = Conversation.objects.create(owner=user, session_id="all", token_budget=1000)
    append_messages(conversation, 60)
    errors: list[BaseException] = []
    done = threading.Event()
    outcomes = {"applied": 0, "conflicts": 0, "compactions": 0}

    def writer(k: int) -> None:
        try:
            for i in range(8):
                append_messages(conversation, 3, start=1000 * (k + 1) + 3 * i)
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)
        finally:
            connection.close()

    def sweeper() -> None:
        try:
            while not done.is_set():
                try:
                    compact_conversation(
                        conversation_id=conversation.pk,
                        mode="full",
                        summarizer=DeterministicSummarizer(),
                    )
                    outcomes["compactions"] += 1
                except Conflict:
                    pass
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)
        finally:
            connection.close()

    def repairer() -> None:
        try:
            while not done.is_set():
                # Knock a raw message out of the context, then plan and apply its repair.
                item = (
                    ContextItem.objects.filter(conversation=conversation, item_type="message")
                    .order_by("-ordinal")
                    .first()
                )
                if item is not None:
                    ContextItem.objects.filter(pk=item.pk).delete()
                plan = _plan_or_none(conversation)
                if plan is None:
                    continue
                try:
                    repair_plan_apply(plan_id=plan.pk)
                except Conflict:
                    outcomes["conflicts"] += 1
                    repair_plan_apply_when_free(plan.pk)
                outcomes["applied"] += 1
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(2)]
    helpers = [threading.Thread(target=sweeper), threading.Thread(target=repairer)]
    for thread in threads + helpers:
        thread.start()
    for thread in threads:
        thread.join(120)
    done.set()
    for thread in helpers:
        thread.join(120)
    assert errors == []
    assert outcomes["applied"] >= 1
    assert Message.objects.filter(conversation=conversation).count() == 60 + 2 * 8 * 3
    assert problems(conversation.pk) == {}


def _plan_or_none(conversation):
    report = integrity_scan(
        conversation_id=conversation.pk, mode=ScanMode.SCAN_AND_PLAN, trigger=Trigger.COMMAND
    )
    return report.plans.first()


def repair_plan_apply_when_free(plan_id: int) -> None:
    """A conflict means a compaction was writing: the same plan applies once it is done."""
    for _ in range(200):
        try:
            repair_plan_apply(plan_id=plan_id)
            return
        except Conflict:
            threading.Event().wait(0.05)
    raise AssertionError("the compaction lock never came free")


def test_the_database_refuses_a_second_plan_for_one_conversation_in_one_report(small_compacted):
    from django.db import IntegrityError, transaction

    conversation, _, _ = small_compacted
    sql("UPDATE conversations_conversation SET last_seq = 17 WHERE id = %s", [conversation.pk])
    plan = _plan(conversation)
    with pytest.raises(IntegrityError), transaction.atomic():
        RepairPlan.objects.create(report=plan.report, conversation=conversation, actions=[])
    assert RepairPlan.objects.filter(report=plan.report).count() == 1
