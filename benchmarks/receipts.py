"""Receipts as users run them (docs/receipts.md): the served app (`lcm_serve` with its
worker, default settings) relaying a stateless client's conversation through the drop-in
Chat Completions wire to a local upstream (benchmarks.dropin's `_Upstream`), once with
receipts off (the same-run baseline) and once on.

Figures:
- time added per call: the client's p50 latency with receipts on minus off (whole calls,
  `_TURNS` turns each, the history resent every time), and the recorder's own time per
  call as each receipt records it (`record_microseconds`), p50 / p95;
- bytes per receipt: the compressed manifest, p50 and the worst against the goal of
  300 bytes + 8 per item; the blobs (the client's system prompt, stored once per
  conversation) apart;
- replay time: `GET /api/v1/receipts/{id}/request/?as=raw` through the served app, p50,
  and the rebuild alone in this process; every replay is checked byte-exact.
Writes under a user 'lcm-bench-receipts': use a scratch database.
"""

from __future__ import annotations

import http.client
import os
import statistics
import time

import openai

from benchmarks.dropin import _ENV, _Upstream
from benchmarks.harness import BenchContext, BenchRow, benchmark, p50, percentile

_TURNS = 40
_SYSTEM = "You are the harbour master's assistant. " + " ".join(
    f"Rule {i}: answer with the tide table and the berth number." for i in range(40)
)


def _question(i: int) -> str:
    return (
        f"Turn {i}: which ferry left berth {i % 9} at dawn, and did the pilot check the tide "
        "tables before the harbour gate opened for the fishing boats?"
    )


def _conversation(port: int, token: str, key: str) -> list[float]:
    client = openai.OpenAI(
        api_key=token, base_url=f"http://127.0.0.1:{port}/openai/v1", max_retries=0, timeout=120
    )
    history = [{"role": "system", "content": _SYSTEM}]
    latencies = []
    for i in range(_TURNS):
        history.append({"role": "user", "content": _question(i)})
        sent = time.perf_counter()
        reply = client.chat.completions.create(
            model="bench_chat",
            messages=history,
            max_tokens=200,
            extra_headers={"X-LCM-Conversation": key},
        )
        latencies.append((time.perf_counter() - sent) * 1000)
        history.append({"role": "assistant", "content": reply.choices[0].message.content})
    return latencies


def _served(receipts: bool, upstream_url: str):
    from benchmarks.indexing_served import _Served

    saved = dict(os.environ)
    os.environ.update(
        {
            **_ENV,
            "LCM_BENCH_CHAT_BASE_URL": upstream_url,
            "LCM_RECEIPTS": "true" if receipts else "false",
        }
    )
    try:
        return _Served()
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _raw_replay_ms(port: int, token: str, receipt_id: str, expected: int) -> float:
    probe = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    started = time.perf_counter()
    probe.request(
        "GET",
        f"/api/v1/receipts/{receipt_id}/request/?as=raw",
        headers={"Authorization": f"Token {token}"},
    )
    answer = probe.getresponse()
    body = answer.read()
    elapsed = (time.perf_counter() - started) * 1000
    probe.close()
    if answer.getheader("X-LCM-Replay-Exact") != "true" or len(body) != expected:
        raise RuntimeError(f"receipt {receipt_id}: the replay is not exact")
    return elapsed


@benchmark("receipts_served")
def receipts_served(ctx: BenchContext) -> list[BenchRow]:
    from django.contrib.auth import get_user_model

    from receipts.models import Receipt, ReceiptBlob
    from receipts.selectors import receipt_detail, replay
    from tokens.services import token_rotate

    user, _ = get_user_model().objects.get_or_create(username="lcm-bench-receipts")
    token = token_rotate(user=user, name=f"receipts-{time.time_ns()}").key
    upstream = _Upstream()
    load_before = os.getloadavg()[0]
    latencies, keys = {}, {}
    try:
        for receipts in (False, True):
            server = _served(receipts, upstream.url)
            try:
                keys[receipts] = f"bench-receipts-{receipts}-{time.time_ns()}"
                _conversation(server.port, token, keys[receipts])  # warm the process
                keys[receipts] += "-timed"
                latencies[receipts] = _conversation(server.port, token, keys[receipts])
                if receipts:
                    rows = list(
                        Receipt.objects.filter(source__startswith="thread:").order_by("-id")[
                            :_TURNS
                        ]
                    )[::-1]
                    served_replays = [
                        _raw_replay_ms(server.port, token, r.id, r.body_bytes) for r in rows
                    ]
            finally:
                server.stop()
    finally:
        upstream.stop()
    details = [receipt_detail(r) for r in rows]
    recorded_us = [d["record_microseconds"] for d in details]
    sizes = [len(r.manifest) for r in rows]
    over = [
        (len(r.manifest), r.item_count) for r in rows if len(r.manifest) > 300 + 8 * r.item_count
    ]
    rebuilds = []
    for r in rows:
        started = time.perf_counter()
        if not replay(r).exact:
            raise RuntimeError(f"receipt {r.id}: the replay is not exact")
        rebuilds.append((time.perf_counter() - started) * 1000)
    blobs = ReceiptBlob.objects.filter(conversation_id=rows[-1].conversation_id)
    blob_bytes = sum(len(b) for b in blobs.values_list("data", flat=True))
    added = p50(latencies[True]) - p50(latencies[False])
    ctx.notes.append(f"receipts_served: load {load_before:.1f} -> {os.getloadavg()[0]:.1f}")
    items = statistics.median(r.item_count for r in rows)
    return [
        BenchRow(
            "receipts: time added per call (served, p50 on - off)",
            added,
            "ms",
            "<= 1 ms",
            f"p50 {p50(latencies[True]):.1f} ms on, {p50(latencies[False]):.1f} ms off; {_TURNS} calls each",
        ),  # fmt: skip
        BenchRow(
            "receipts: recorder time per call, p50",
            p50(recorded_us) / 1000,
            "ms",
            "<= 1 ms",
            f"p95 {percentile(recorded_us, 0.95) / 1000:.2f} ms",
        ),  # fmt: skip
        BenchRow(
            "receipts: bytes per receipt, p50",
            p50(sizes),
            "bytes",
            "<= 300 + 8/item",
            f"median {items:.0f} items (goal {300 + 8 * items:.0f}); max {max(sizes)}; "
            f"{len(over)} of {len(rows)} over the goal; blobs {blob_bytes} bytes once per conversation",
        ),  # fmt: skip
        BenchRow(
            "receipts: replay through the API, p50",
            p50(served_replays),
            "ms",
            "",
            f"p95 {percentile(served_replays, 0.95):.1f} ms; rebuild alone p50 {p50(rebuilds):.2f} ms; all byte-exact",
        ),  # fmt: skip
    ]
