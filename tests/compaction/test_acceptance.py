"""The issue's acceptance checks: a 2,000-message conversation swept with default settings,
and appends racing repeated sweeps (asked for on PostgreSQL; it runs on SQLite too)."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from compaction.assembly import assemble_context
from compaction.engine import compact_conversation
from conversations.inputs import parse_message
from conversations.models import ContextItem, Message, Summary, SummaryMessage, SummaryParent
from conversations.services import messages_append
from core.api.errors import Conflict
from tests.compaction.helpers import all_message_ids, messages_reachable_from_context
from tests.factories import append_messages, message_payload


def test_a_full_sweep_of_2000_messages_cuts_the_context_by_90_percent(make_conversation, settings):
    settings.LCM_AUTOCOMPACT_DISABLED = True
    conversation = make_conversation(token_budget=8000)
    append_messages(conversation, 2000)
    before = assemble_context(conversation=conversation, token_budget=10**7).token_estimate
    assert before > 4 * conversation.token_budget

    result = compact_conversation(conversation_id=conversation.pk, mode="full")

    after = assemble_context(conversation=conversation)
    assert result.status == "compacted"
    assert after.token_estimate <= before * 0.10
    assert after.token_estimate <= conversation.token_budget
    assert after.dropped == []
    assert messages_reachable_from_context(conversation) == all_message_ids(conversation)
    assert Message.objects.filter(conversation=conversation).count() == 2000


def expanded_seqs(conversation) -> list[int]:
    """The context expanded to message seqs, in context order (leaf edges in order,
    condensed sources in order)."""
    leaf_seqs: dict[str, list[int]] = {}
    for summary_id, seq in (
        SummaryMessage.objects.filter(conversation=conversation)
        .order_by("summary_id", "ordinal")
        .values_list("summary_id", "message__seq")
    ):
        leaf_seqs.setdefault(summary_id, []).append(seq)
    parents: dict[str, list[str]] = {}
    for summary_id, parent in (
        SummaryParent.objects.filter(conversation=conversation)
        .order_by("summary_id", "ordinal")
        .values_list("summary_id", "parent_summary_id")
    ):
        parents.setdefault(summary_id, []).append(parent)

    def expand(summary_id):
        if summary_id in leaf_seqs:
            return list(leaf_seqs[summary_id])
        return [seq for parent in parents[summary_id] for seq in expand(parent)]

    seqs = []
    for seq, summary_id in (
        ContextItem.objects.filter(conversation=conversation)
        .order_by("ordinal")
        .values_list("message__seq", "summary_id")
    ):
        seqs.extend([seq] if summary_id is None else expand(summary_id))
    return seqs


@pytest.mark.django_db(transaction=True)
def test_appends_racing_repeated_sweeps_lose_nothing_and_keep_order(make_conversation, settings):
    settings.LCM_AUTOCOMPACT_DISABLED = True
    settings.LCM_LEAF_CHUNK_TOKENS = 300
    settings.LCM_LEAF_TARGET_TOKENS = 100
    settings.LCM_CONDENSED_TARGET_TOKENS = 150
    settings.LCM_LEAF_MIN_FANOUT = 3
    settings.LCM_CONDENSED_MIN_FANOUT = 3
    conversation = make_conversation()
    append_messages(conversation, 40)
    writers, batches, per_batch = 4, 15, 5
    errors: list[BaseException] = []
    done = threading.Event()
    outcomes = {"compacted": 0, "conflicts": 0, "compacted_while_writing": 0}

    written = [0] * writers
    compacted_during_writes = threading.Event()

    def writer(n):
        # At least `batches` batches, and on until a sweep compacted while writers run
        # (one batch is one fast statement on PostgreSQL: a fixed count can finish
        # before the first sweep does), at most ten times as many.
        try:
            b = 0
            while b < batches or (not compacted_during_writes.is_set() and b < 10 * batches):
                start = 10_000 * (n + 1) + b * per_batch
                messages_append(
                    conversation_id=conversation.pk,
                    messages=[
                        parse_message(message_payload(i)) for i in range(start, start + per_batch)
                    ],
                )
                b += 1
                written[n] = b
        except BaseException as error:  # surfaced below
            errors.append(error)
        finally:
            connection.close()

    def sweeper():
        try:
            while not done.is_set():
                try:
                    result = compact_conversation(conversation_id=conversation.pk, mode="full")
                    outcomes["compacted"] += result.status == "compacted"
                    while_writing = result.status == "compacted" and any(
                        t.is_alive() for t in threads
                    )
                    outcomes["compacted_while_writing"] += while_writing
                    if while_writing:
                        compacted_during_writes.set()
                except Conflict:
                    outcomes["conflicts"] += 1
        except BaseException as error:
            errors.append(error)
        finally:
            connection.close()

    sweepers = [threading.Thread(target=sweeper) for _ in range(2)]
    threads = [threading.Thread(target=writer, args=(n,)) for n in range(writers)]
    for thread in sweepers + threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    done.set()
    for thread in sweepers:
        thread.join(120)

    assert errors == []
    total = 40 + sum(written) * per_batch
    seqs = list(Message.objects.filter(conversation=conversation).values_list("seq", flat=True))
    assert sorted(seqs) == list(range(1, total + 1))
    assert outcomes["compacted"] >= 1, outcomes
    if connection.vendor == "postgresql":  # SQLite's single writer may not interleave them
        assert outcomes["compacted_while_writing"] >= 1, outcomes
    assert expanded_seqs(conversation) == list(range(1, total + 1))
    for summary in Summary.objects.filter(conversation=conversation):
        edges = summary.message_links.count() + summary.parent_links.count()
        assert edges >= 1
    assert SummaryMessage.objects.values("message_id").distinct().count() == (
        SummaryMessage.objects.count()
    )
