"""Benchmark row: the deterministic summarizer over 20,000 tokens of agent transcript."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from benchmarks.harness import BenchContext, BenchRow, benchmark, p50
from compaction.summarizers import DeterministicSummarizer, SourceItem, SummaryRequest
from core.token_estimate import estimate_tokens

PARAGRAPH = (
    "We looked at compaction/engine.py again and the planner still calls summary_create "
    "twice. Let's use the advisory lock instead of select_for_update. The p95 went from "
    "180 ms to 95 ms after that. Is the fresh tail still 8 messages? TODO: add a regression "
    "test. Otherwise the discussion wandered a bit today.\n"
) * 6


@benchmark("summarizer")
def summarizer(ctx: BenchContext) -> list[BenchRow]:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    sources, total = [], 0
    while total < 20_000:
        seq = len(sources)
        sources.append(
            SourceItem(
                ref=f"msg:{seq}",
                kind="message",
                content=PARAGRAPH,
                created_at=start + timedelta(minutes=seq),
                role=("user", "assistant", "tool")[seq % 3],
            )
        )
        total += estimate_tokens(PARAGRAPH)
    request = SummaryRequest(sources=sources, depth=0, target_tokens=600, level="normal")
    engine = DeterministicSummarizer()
    samples = []
    for _ in range(ctx.n(10)):
        started = time.perf_counter()
        engine.summarize(request)
        samples.append((time.perf_counter() - started) * 1000)
    return [
        BenchRow(
            "deterministic summarizer, 20,000 tokens in, p50",
            p50(samples),
            "ms",
            "< 50 ms",
            f"{len(samples)} runs",
        )
    ]
