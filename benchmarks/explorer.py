"""Explorer benchmarks: server time of the conversation page and the DAG page.

Pages are rendered in-process through Django's test client (no network), which is the
server time the issue's target is about (< 500 ms for a 10,000-message conversation).
"""

from __future__ import annotations

import time

from django.test import Client
from django.test.utils import override_settings

from benchmarks.conversations import bench_user, new_conversation, synthetic_payload
from benchmarks.harness import BenchContext, BenchRow, benchmark, p50, percentile
from compaction.engine import compact_conversation
from compaction.summarizers import DeterministicSummarizer
from conversations.inputs import parse_message
from conversations.models import Summary
from conversations.services import messages_append


def _fill(conversation, count: int) -> None:
    payloads = [parse_message(synthetic_payload(i)) for i in range(count)]
    for offset in range(0, count, 1000):
        messages_append(conversation_id=conversation.pk, messages=payloads[offset : offset + 1000])


def _page_ms(client: Client, url: str, runs: int) -> list[float]:
    samples = []
    client.get(url)  # warm caches (templates, session)
    for _ in range(runs):
        start = time.perf_counter()
        response = client.get(url)
        samples.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200, response.status_code
    return samples


def _row(name: str, samples: list[float], target: str, detail: str) -> BenchRow:
    return BenchRow(
        name,
        p50(samples),
        "ms",
        target,
        f"p95 {percentile(samples, 0.95):.1f} ms, {len(samples)} requests; {detail}",
    )


@benchmark("explorer")
def explorer_pages(ctx: BenchContext) -> list[BenchRow]:
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(bench_user())
    runs = max(5, ctx.n(20))
    rows = []

    count = ctx.n(10_000)
    raw = new_conversation("explorer-raw")
    _fill(raw, count)
    samples = _page_ms(client, f"/conversations/{raw.pk}/", runs)
    rows.append(
        _row(
            f"conversation page, {count:,} raw messages (uncompacted)",
            samples,
            "< 500 ms",
            "newest timeline page + context bar via the assembler",
        )
    )
    samples = _page_ms(client, f"/conversations/{raw.pk}/?from=1", runs)
    rows.append(
        _row(f"conversation page, {count:,} messages, oldest page", samples, "< 500 ms", "")
    )

    compact_conversation(conversation_id=raw.pk, mode="full", summarizer=DeterministicSummarizer())
    summaries = Summary.objects.filter(conversation=raw).count()
    samples = _page_ms(client, f"/conversations/{raw.pk}/?from=1", runs)
    rows.append(
        _row(
            f"conversation page, {count:,} messages after full compaction",
            samples,
            "< 500 ms",
            f"{summaries} summaries; oldest page (every message covered)",
        )
    )

    # A wide DAG: small leaf chunks give many summaries from the same history.
    wide = new_conversation("explorer-dag")
    _fill(wide, ctx.n(3_000))
    with override_settings(LCM_LEAF_CHUNK_TOKENS=256, LCM_COMPACTION_MAX_PASSES=100_000):
        compact_conversation(
            conversation_id=wide.pk, mode="full", summarizer=DeterministicSummarizer()
        )
    summaries = Summary.objects.filter(conversation=wide).count()
    samples = _page_ms(client, f"/conversations/{wide.pk}/dag/", runs)
    rows.append(
        _row(
            f"summary DAG page, {summaries:,} summaries",
            samples,
            "",
            "server time only; the layout runs in the browser",
        )
    )
    return rows
