"""The reference workload (`lcm_bench --reference-workload`) is the one issue 14 defines:
a deterministic 4-message cycle of agent messages, ~270 characters and ~80 estimated
tokens each on average, all unique; and it goes through the real ingest and compaction."""

from __future__ import annotations

import json

from django.test import override_settings

from benchmarks.reference import ROWS, render_reference_table
from benchmarks.reference_workload import (
    REFERENCE_SETTINGS,
    InstantSummarizer,
    reference_messages,
    reference_payloads,
    workload_shape,
)
from compaction.engine import compact_conversation
from conversations.models import Message, MessagePart
from conversations.services import messages_append


def test_the_cycle_is_user_tool_call_tool_result_answer_and_deterministic():
    payloads = reference_payloads(8)
    assert [p["role"] for p in payloads] == ["user", "assistant", "tool", "assistant"] * 2
    call, result = payloads[1]["parts"][1], payloads[2]["parts"][0]
    assert call["tool_call_id"].startswith("toolu_")
    assert call["tool_call_id"] == result["tool_call_id"]
    assert len(json.dumps(call["tool_input"])) < 100
    assert 5 <= len(result["tool_output"].splitlines()) <= 12
    assert reference_payloads(8) == payloads
    assert reference_payloads(8, seed=1) != payloads
    # a continuation is the same messages, not new ones
    assert reference_payloads(3, start=5) == payloads[5:8]


def test_the_messages_have_the_specified_size_and_are_unique(db):
    shape = workload_shape(2_000)
    assert 250 <= shape["avg_chars"] <= 290, shape
    assert 75 <= shape["avg_tokens"] <= 85, shape
    assert shape["unique"]


def test_the_workload_ingests_and_compacts_with_the_instant_summarizer(conversation):
    with override_settings(**REFERENCE_SETTINGS, LCM_AUTOCOMPACT_DISABLED=True):
        messages = reference_messages(400)
        messages_append(conversation_id=conversation.pk, messages=messages[:200])
        for message in messages[200:204]:  # the one-message path too
            messages_append(conversation_id=conversation.pk, messages=[message])
        assert Message.objects.filter(conversation=conversation).count() == 204
        assert MessagePart.objects.filter(part_type="tool").count() == 102
        result = compact_conversation(
            conversation_id=conversation.pk, mode="full", summarizer=InstantSummarizer()
        )
    assert result.status == "compacted"
    assert result.tokens_after < result.tokens_before
    summary = conversation.summaries.order_by("created_at").first()
    assert "Expand for details about" in summary.content
    assert len(summary.content) <= 2_400 + 100


def test_the_table_prints_every_row_with_the_reference_and_the_ratio():
    results = {
        "sqlite": {"ingest_one": {"value": 5276.0, "detail": "10,000 calls"}},
        "postgresql": {"assemble_10k": {"value": 6.01, "detail": ""}},
    }
    table = render_reference_table(results, "x86_64 2 cores", "0.5 0.4 0.3")
    lines = [line for line in table.splitlines() if line.startswith("| ")]
    assert len(lines) == 1 + len(ROWS)  # header + one line per row
    ingest = next(line for line in lines if line.startswith("| ingest, one message"))
    assert "2,638 msg/s" in ingest and "5,276 msg/s" in ingest and "2.0×" in ingest
    assemble = next(line for line in lines if line.startswith("| assemble, uncompacted 10,000"))
    assert "6.01 ms" in assemble and "100.0×" in assemble
