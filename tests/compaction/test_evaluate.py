from __future__ import annotations

import logging

import pytest
from django.test import Client

from compaction.engine import compact_conversation
from compaction.evaluation import evaluate
from conversations.models import Summary
from tests.compaction.helpers import context_tokens
from tests.factories import append_messages


def test_evaluate_gives_the_decision_and_its_figures(make_conversation, settings):
    settings.LCM_AUTOCOMPACT_DISABLED = True
    settings.LCM_LEAF_CHUNK_TOKENS = 300
    settings.LCM_MAX_ACTIVE_MESSAGES = 25
    conversation = make_conversation(token_budget=100_000)
    append_messages(conversation, 30)

    decision = evaluate(conversation=conversation)

    assert decision.due is True
    assert decision.reasons == ("max_active_messages", "leaf_chunk")
    assert decision.suggested_mode == "full"
    assert decision.context_tokens == context_tokens(conversation)
    assert decision.threshold_tokens == 75_000
    assert decision.active_messages == 30
    assert decision.fresh_tail_items == 8
    assert decision.raw_tokens_outside_tail > 300


def test_evaluate_says_not_due_for_a_short_conversation(conversation):
    append_messages(conversation, 5)

    decision = evaluate(conversation=conversation)

    assert (decision.due, decision.reasons, decision.suggested_mode) == (False, (), None)
    assert decision.raw_tokens_outside_tail == 0


def test_until_under_stops_once_under_the_target(conversation, settings):
    settings.LCM_AUTOCOMPACT_DISABLED = True
    settings.LCM_LEAF_CHUNK_TOKENS = 300
    settings.LCM_LEAF_TARGET_TOKENS = 80
    append_messages(conversation, 200)
    target = context_tokens(conversation) // 2

    result = compact_conversation(
        conversation_id=conversation.pk, mode="until_under", target_tokens=target
    )

    assert result.status == "compacted"
    assert result.tokens_after <= target
    # it stopped as soon as it got there: one pass fewer would still be over the target
    assert result.passes < 200 * 25 // 300


def test_metrics_count_runs_and_summaries(conversation, settings, staff_user):
    settings.LCM_AUTOCOMPACT_DISABLED = True
    settings.LCM_LEAF_CHUNK_TOKENS = 300
    append_messages(conversation, 100)
    result = compact_conversation(conversation_id=conversation.pk, mode="full")

    body = Client().get("/metrics").content.decode()

    assert 'lcm_compaction_runs_total{status="compacted",reason="manual"} 1' in body
    assert result.summaries_created
    leaves = Summary.objects.filter(kind="leaf").count()
    condensed = Summary.objects.filter(kind="condensed").count()
    assert leaves + condensed == len(result.summaries_created)
    assert f'lcm_summaries_created_total{{kind="leaf"}} {leaves}' in body
    assert f'lcm_summaries_created_total{{kind="condensed"}} {condensed}' in body


@pytest.mark.parametrize("tail_count", [0, 1, 3, 8, 50])
@pytest.mark.parametrize("shape", ["plain", "no_user", "compacted"])
def test_the_one_statement_figures_agree_with_the_planner(
    conversation, settings, tail_count, shape
):
    from compaction.evaluation import context_figures
    from compaction.planning import context_rows, raw_tokens_outside_tail
    from compaction.tail_outputs import FreshTail

    settings.LCM_LEAF_CHUNK_TOKENS = 300
    if shape == "no_user":
        append_messages(
            conversation, 30, payload=lambda i: {"role": "assistant", "content": f"step {i}"}
        )
    else:
        append_messages(conversation, 90)
    if shape == "compacted":
        compact_conversation(conversation_id=conversation.pk, mode="full")
        append_messages(conversation, 5, start=500)

    rows = context_rows(conversation.pk)
    settings.LCM_FRESH_TAIL_COUNT = tail_count
    start = FreshTail(conversation.token_budget).start(rows)
    figures = context_figures(conversation.pk, tail_count)

    assert {k: v for k, v in figures.items() if k not in ("token_budget", "pending_jobs")} == {
        "context_tokens": sum(r.token_count for r in rows),
        "context_items": len(rows),
        "active_messages": sum(r.is_message for r in rows),
        "raw_tokens_outside_tail": raw_tokens_outside_tail(rows, start),
        "fresh_tail_items": len(rows) - start,
    }
    assert (figures["token_budget"], figures["pending_jobs"]) == (conversation.token_budget, 0)


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(level=logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)


def test_log_lines_carry_the_spec_fields(conversation, settings):
    settings.LCM_AUTOCOMPACT_DISABLED = True
    settings.LCM_LEAF_CHUNK_TOKENS = 300
    append_messages(conversation, 60)
    logger, handler = logging.getLogger("lcm.compaction"), _Records()
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        result = compact_conversation(conversation_id=conversation.pk, mode="incremental")
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)

    created = [r for r in handler.records if r.getMessage().startswith("summary created")]
    finished = [r for r in handler.records if r.getMessage().startswith("compaction run finished")]
    assert [r.summary_id for r in created] == result.summaries_created
    first = created[0]
    assert (first.conversation_id, first.session_id, first.compaction_id) == (
        conversation.pk,
        conversation.session_id,
        result.run_id,
    )
    assert first.trigger_reason == "manual"
    assert first.token_after < first.token_before
    assert f"summary_id={first.summary_id}" in first.getMessage()
    assert (finished[0].token_before, finished[0].token_after) == (
        result.tokens_before,
        result.tokens_after,
    )
