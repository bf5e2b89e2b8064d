"""Benchmark rows of the provider layer: what the adapters add on top of the wire.

Each adapter streams from the local fake server of its API (tests/support), through the
real SDK over local HTTP, so the figures are the layer's own cost (SDK parsing, our
accumulation, the events) plus loopback HTTP, with no model in the way.
"""

from __future__ import annotations

import os
import time

from benchmarks.harness import BenchContext, BenchRow, benchmark, p50, percentile
from providers import blocks
from providers.base import ProviderRequest, TextDelta
from providers.config import ModelSpec, model_get
from providers.redaction import redact_secrets
from providers.registry import provider_for

_RUNS = 20


def _request(spec: ModelSpec, text: str = "hello") -> ProviderRequest:
    return ProviderRequest(
        model=spec,
        system="Be brief.",
        messages=[blocks.message("user", text)],
        tools=[],
        max_output_tokens=256,
    )


def _stream_rows(label: str, spec: ModelSpec, api, short, long, deltas: int, runs: int):
    first, totals = [], []
    for _ in range(runs):
        api.enqueue(short)
        started = time.perf_counter()
        for event in provider_for(spec).stream(_request(spec)):
            if isinstance(event, TextDelta) and len(first) < len(totals) + 1:
                first.append((time.perf_counter() - started) * 1000)
        totals.append((time.perf_counter() - started) * 1000)
    api.enqueue(long)
    started = time.perf_counter()
    count = sum(isinstance(e, TextDelta) for e in provider_for(spec).stream(_request(spec)))
    rate = count / (time.perf_counter() - started)
    return [
        BenchRow(f"{label}: first text delta, p50", p50(first), "ms", "", f"{runs} runs"),
        BenchRow(f"{label}: whole 3-delta stream, p95", percentile(totals, 0.95), "ms", "", ""),
        BenchRow(f"{label}: text deltas per second", rate, "/s", "", f"{deltas} deltas"),
    ]


@benchmark("providers")
def providers(ctx: BenchContext) -> list[BenchRow]:
    try:
        from tests.support import fake_messages_api as fm
        from tests.support import fake_responses_api as fr
    except ImportError:
        ctx.notes.append("providers: tests/support not importable, adapter rows skipped")
        fm = fr = None
    rows: list[BenchRow] = []
    runs, deltas = ctx.n(_RUNS), ctx.n(2000)
    saved = {
        k: os.environ.get(k)
        for k in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL")
    }
    try:
        if fm is not None and fr is not None:
            text = "word " * deltas
            with fm.FakeMessagesAPI() as api:
                os.environ["ANTHROPIC_API_KEY"] = "sk-ant-bench"
                os.environ["ANTHROPIC_BASE_URL"] = api.base_url
                rows += _stream_rows(
                    "anthropic adapter",
                    model_get("sonnet"),
                    api,
                    fm.anthropic_text_stream("hello world", chunks=3),
                    fm.anthropic_text_stream(text, chunks=deltas),
                    deltas,
                    runs,
                )
            with fr.FakeResponsesAPI() as api:
                os.environ["OPENAI_API_KEY"] = "sk-bench"
                os.environ["OPENAI_BASE_URL"] = api.base_url
                rows += _stream_rows(
                    "openai adapter",
                    model_get("gpt"),
                    api,
                    fr.responses_text_stream("hello world", chunks=3),
                    fr.responses_text_stream(text, chunks=deltas),
                    deltas,
                    runs,
                )
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    offline = model_get("offline")
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        provider_for(offline).complete(_request(offline))
        samples.append((time.perf_counter() - started) * 1_000_000)
    rows.append(BenchRow("offline provider answer, p50", p50(samples), "µs", "", f"{runs} runs"))
    prompt = ("ordinary prose with a path src/app.py and a number 42. " * 2000)[:100_000]
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        redact_secrets(prompt)
        samples.append((time.perf_counter() - started) * 1000)
    rows.append(BenchRow("redaction hook, 100 KB of prose, p50", p50(samples), "ms", "", ""))
    secrets = (
        prompt[:50_000] + " sk-ant-api03-" + "x" * 40 + " AKIAIOSFODNN7EXAMPLE " + prompt[:50_000]
    )
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        redact_secrets(secrets)
        samples.append((time.perf_counter() - started) * 1000)
    rows.append(BenchRow("redaction hook, 100 KB with 2 secrets, p50", p50(samples), "ms", "", ""))
    return rows
