"""Ingest benchmarks: service-layer batch append and single append through the API."""

from __future__ import annotations

import json
import time
import uuid

from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client

from benchmarks.harness import BenchContext, BenchRow, Timer, benchmark, p50, percentile
from conversations.inputs import parse_message
from conversations.services import conversation_create, messages_append
from tokens.services import token_rotate

_SENTENCE = (
    "the cache layer returns stale entries after deploy so we added a version key to "
    "every lookup and measured the hit rate again while the tests for src/cache/store.py "
    "kept failing on CI with TimeoutError in test_expiry because the clock was mocked"
)
WORDS = _SENTENCE.split(" ")


def bench_user():
    user, _ = get_user_model().objects.get_or_create(username="lcm-bench")
    return user


def synthetic_payload(i: int, words: int = 40) -> dict:
    """An agent-style message: alternating user text and assistant text + tool call."""
    text = " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(words)) + f" #{i}"
    if i % 2 == 0:
        return {
            "role": "user",
            "content": text,
            "parts": [
                {"part_type": "text", "text_content": text},
                {"part_type": "step_start"},
            ],
        }
    return {
        "role": "assistant",
        "content": text,
        "parts": [
            {"part_type": "text", "text_content": text},
            {
                "part_type": "tool",
                "tool_name": "bash",
                "tool_call_id": f"call_{i}",
                "tool_input": {"command": f"pytest -k test_{i}"},
                "tool_status": "completed",
                "tool_output": "1 passed",
            },
        ],
    }


def new_conversation(label: str):
    conversation, _ = conversation_create(
        owner=bench_user(), session_id=f"bench-{label}-{uuid.uuid4().hex[:8]}"
    )
    return conversation


@benchmark("ingest")
def ingest(ctx: BenchContext) -> list[BenchRow]:
    rows = []
    batches, batch_size = ctx.n(10), 1000
    conversation = new_conversation("batch")
    payloads = [parse_message(synthetic_payload(i)) for i in range(batch_size)]
    seconds = []
    for _ in range(batches):
        with Timer() as t:
            messages_append(conversation_id=conversation.pk, messages=payloads)
        seconds.append(t.seconds)
    rate = batch_size / p50(seconds)  # p50 batch: robust to one batch caught by autovacuum
    overall = batches * batch_size / sum(seconds)
    target = "≥ 5,000 msg/s" if connection.vendor == "postgresql" else "≥ 2,000 msg/s"
    rows.append(
        BenchRow(
            f"ingest, service batches of 1,000 (2 parts each), {connection.vendor}, p50 batch",
            rate,
            "msg/s",
            target,
            f"{batches:,} batches; overall {overall:,.0f} msg/s, slowest batch {max(seconds) * 1000:.0f} ms",
        )
    )

    conversation = new_conversation("single")
    singles = ctx.n(500)
    with Timer() as t:
        for i in range(singles):
            messages_append(conversation_id=conversation.pk, messages=[payloads[i % batch_size]])
    rows.append(
        BenchRow(
            "ingest, service, one message per call",
            singles / t.seconds,
            "msg/s",
            "",
            f"{singles:,} calls",
        )
    )

    user = bench_user()
    token = token_rotate(user=user, name="bench")
    client = Client(HTTP_AUTHORIZATION=f"Token {token.key}", HTTP_HOST="127.0.0.1")
    conversation = new_conversation("api")
    url = f"/api/v1/conversations/{conversation.pk}/messages/"
    samples = []
    for i in range(ctx.n(300)):
        body = json.dumps(synthetic_payload(i))
        start = time.perf_counter()
        response = client.post(url, body, content_type="application/json")
        samples.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 201, response.content
    rows.append(
        BenchRow(
            "ingest, one message through the API (in-process client), p50",
            p50(samples),
            "ms",
            "< 15 ms",
            f"p95 {percentile(samples, 0.95):.1f} ms, {len(samples)} requests",
        )
    )
    return rows
