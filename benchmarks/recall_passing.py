"""Recall of paraphrased facts through the served app (`lcm_bench --only recall_passing`,
issue 47; docs/benchmarks.md, "Facts said in passing").

The product as users run it: `lcm_serve` with its background worker on the configured
database, default settings (LCM_EMBEDDING_MODEL and the other LCM_* variables of the
environment pass through), the conversations written with `POST .../messages/` in batches of
100, indexed by the worker, and every question asked with `POST /api/v1/grep/` (scope
messages, sort relevance) in the modes full_text, semantic and hybrid. Two shapes of the
recall fixture (benchmarks/recall_fixture.py), 5,000 messages each:

- **in passing**: 30 facts, each one sentence appended to an ordinary message of 40-110
  words, asked by a question sharing no content word with that whole message;
- **own message** (the fixture's older shape): 200 facts, each a message of its own;
- **in passing, LoCoMo size**: the first shape in a conversation of 600 messages, about a
  LoCoMo conversation's length (20 facts): the latency target's size.

A hit: the fact's message is among the first 6 rows (also reported: among the first 10,
and the share of hits whose passage, the row's `text`, holds the fact sentence itself).
Beside them, the same-run baseline priced alike: BM25 over single messages
(benchmarks.recall_eval.SingleMessageBM25) over the same messages, first 6 and 10. Latency:
the client's wall time per grep over one keep-alive connection, p50 and p95.
"""

from __future__ import annotations

import datetime as dt
import http.client
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import connection

from benchmarks import recall_fixture
from benchmarks.conversations import bench_user
from benchmarks.harness import BenchContext, BenchRow, benchmark, percentile
from benchmarks.recall_eval import SingleMessageBM25

MODES = ("full_text", "semantic", "hybrid")
FIRST, WIDER = 6, 10
BATCH = 100
LOCOMO_SIZE = 600  # messages in a LoCoMo conversation, about (the latency target's size)


@dataclass(frozen=True)
class Question:
    text: str
    seq: int
    fact: str


@dataclass
class ShapeResult:
    shape: str
    hits: dict  # mode -> [first 6, first 10, passage holds the fact] counts
    latency_ms: dict  # mode -> samples
    questions: int
    baseline: tuple[int, int]  # BM25 over single messages: first 6, first 10
    index_seconds: float
    load: float = 0.0  # the load average (1 min) when the questions were asked


def shapes(ctx: BenchContext) -> dict[str, tuple[list[tuple[str, str]], list[Question]]]:
    total = max(500, ctx.n(5000))
    passing, facts = recall_fixture.passing_messages(total=total, facts=max(10, ctx.n(30)))
    own, planted = recall_fixture.messages(total=total, facts=max(20, ctx.n(200)))
    small, said = recall_fixture.passing_messages(total=LOCOMO_SIZE, facts=20, seed=48)
    return {
        "in passing": (passing, [Question(f.question, f.seq, f.fact) for f in facts]),
        "own message": (own, [Question(f.question, f.seq, f.fact) for f in planted]),
        "in passing, LoCoMo size": (small, [Question(f.question, f.seq, f.fact) for f in said]),
    }


class Served:
    """`lcm_serve` (uvicorn + the qcluster worker) on the configured database, as a child."""

    def __init__(self, port: int) -> None:
        self.port = port
        env = dict(os.environ, PYTHONUNBUFFERED="1", LCM_DATA_DIR=str(settings.DATA_DIR))
        db = connection.settings_dict
        if connection.vendor == "sqlite":
            env["LCM_DATABASE_URL"] = f"sqlite:///{db['NAME']}"
        manage = Path(settings.BASE_DIR) / "manage.py"
        self.log = open(Path(settings.DATA_DIR) / "recall_passing_server.log", "ab")  # noqa: SIM115
        self.process = subprocess.Popen(
            [sys.executable, str(manage), "lcm_serve", "--no-demo", "--no-migrate",
             "--port", str(port)],
            env=env, stdout=self.log, stderr=self.log, start_new_session=True,
        )  # fmt: skip

    def client(self, token: str) -> Client:
        deadline = time.monotonic() + 180
        while True:
            try:
                probe = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                probe.request("GET", "/api/v1/conversations/")
                probe.getresponse().read()
                probe.close()
                return Client(self.port, token)
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError("lcm_serve did not start") from None
                time.sleep(0.3)

    def stop(self) -> None:
        os.killpg(self.process.pid, 15)
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, 9)
            self.process.wait(10)
        self.log.close()


class Client:
    """JSON over one keep-alive connection, as an SDK would."""

    def __init__(self, port: int, token: str) -> None:
        self.port = port
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}

    def post(self, path: str, body: dict) -> dict:
        data = json.dumps(body, default=str)
        try:
            self.connection.request("POST", path, data, self.headers)
            response = self.connection.getresponse()
        except (ConnectionError, http.client.HTTPException):  # the server closed an idle one
            self.connection.close()
            self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
            self.connection.request("POST", path, data, self.headers)
            response = self.connection.getresponse()
        payload = response.read()
        if response.status >= 300:
            raise RuntimeError(f"POST {path}: HTTP {response.status} {payload[:300]!r}")
        return json.loads(payload)


def _write(client: Client, name: str, rows: list[tuple[str, str]]) -> int:
    conversation = client.post("/api/v1/conversations/", {"session_id": f"recall-{name}"})
    path = f"/api/v1/conversations/{conversation['id']}/messages/"
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    for first in range(0, len(rows), BATCH):
        batch = [
            {"role": role, "content": text, "created_at": start + dt.timedelta(minutes=i)}
            for i, (role, text) in enumerate(rows[first : first + BATCH], start=first)
        ]
        client.post(path, {"messages": batch})
    return conversation["id"]


def _wait_indexed(conversation_id: int, last_seq: int, timeout: float = 3600) -> None:
    """Until the worker's indexing reached the last message (its cursor, in the database)."""
    from memory.models import MessageIndexCursor

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        cursor = MessageIndexCursor.objects.filter(conversation_id=conversation_id).first()
        if cursor is not None and cursor.last_seq >= last_seq:
            return
        time.sleep(1)
    raise RuntimeError(f"conversation {conversation_id} not indexed in {timeout} s")


def _ask(client: Client, conversation_id: int, questions: list[Question], result: ShapeResult):
    for mode in MODES:
        counts, samples = [0, 0, 0], []
        for question in questions:
            began = time.perf_counter()
            rows = client.post(
                "/api/v1/grep/",
                {
                    "query": question.text,
                    "mode": mode,
                    "scope": "messages",
                    "conversation_id": conversation_id,
                    "limit": WIDER,
                    "sort": "relevance",
                },
            )["results"]
            samples.append((time.perf_counter() - began) * 1000)
            at = [i for i, row in enumerate(rows) if _covers(row, question.seq)]
            if at and at[0] < FIRST:
                counts[0] += 1
                counts[2] += question.fact in (rows[at[0]].get("text") or rows[at[0]]["snippet"])
            counts[1] += bool(at)
        result.hits[mode], result.latency_ms[mode] = counts, samples


def _covers(row: dict, seq: int) -> bool:
    return row.get("seq") is not None and row["seq"] <= seq <= row.get("seq_end", row["seq"])


def _baseline(rows: list[tuple[str, str]], questions: list[Question]) -> tuple[int, int]:
    bm25 = SingleMessageBM25([text for _, text in rows])
    first = wider = 0
    for question in questions:
        ranked = [i + 1 for i in bm25.rank(question.text)[:WIDER]]
        first += question.seq in ranked[:FIRST]
        wider += question.seq in ranked
    return first, wider


def measure(ctx: BenchContext, port: int | None = None) -> list[ShapeResult]:
    from tokens.services import token_rotate

    token = token_rotate(user=bench_user(), name="recall-passing").key
    server = Served(port or int(os.environ.get("RECALL_PASSING_PORT", "8101")))
    results = []
    try:
        client = server.client(token)
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d%H%M%S")
        for shape, (rows, questions) in shapes(ctx).items():
            began = time.perf_counter()
            conversation_id = _write(client, f"{shape}-{stamp}", rows)
            _wait_indexed(conversation_id, len(rows))
            result = ShapeResult(
                shape, {}, {}, len(questions), _baseline(rows, questions),
                time.perf_counter() - began,
            )  # fmt: skip
            _ask(client, conversation_id, questions, result)
            result.load = os.getloadavg()[0]
            results.append(result)
    finally:
        server.stop()
    return results


@benchmark("recall_passing")
def recall_passing(ctx: BenchContext) -> list[BenchRow]:
    out = []
    for result in measure(ctx):
        n = result.questions
        for mode in MODES:
            first, wider, passage = result.hits[mode]
            samples = result.latency_ms[mode]
            out.append(
                BenchRow(
                    f"recall@6 over HTTP, {result.shape}, {mode} ({connection.vendor})",
                    round(first / n, 3),
                    "share",
                    "hybrid >= 0.85 and >= semantic" if mode == "hybrid" else "",
                    f"{first} of {n} hits, @10 {wider / n:.3f}; the passage holds the fact in "
                    f"{passage} of them; grep p50 {statistics.median(samples):.1f} ms, "
                    f"p95 {percentile(samples, 0.95):.1f} ms at load {result.load:.1f}",
                )
            )
        first, wider = result.baseline
        out.append(
            BenchRow(
                f"recall@6, {result.shape}, BM25 over single messages (same run)",
                round(first / n, 3),
                "share",
                "",
                f"@10 {wider / n:.3f}; write + index {result.index_seconds:.0f} s",
            )
        )
    return out
