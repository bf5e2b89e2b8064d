"""`lcm_bench --reference-workload`: the reference implementation's rows, like for like.

`measure_all(ctx)` runs every row on the configured database, in-process through the
service layer (and one HTTP row through a real `lcm_serve` child), and returns
`{row key: Measurement}`. The command runs it once per database in a child process
(`lcm_bench --reference-workload --reference-child`) and prints one table:
`render_reference_table`. The rows and reference figures are from issue 14 and
/work/shared/notes/reference-implementation-figures.md.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import connection
from django.test import override_settings

from benchmarks.harness import BenchContext, p50, percentile
from benchmarks.reference_workload import (
    REFERENCE_BUDGET,
    REFERENCE_SETTINGS,
    InstantSummarizer,
    reference_messages,
    reference_payloads,
    workload_shape,
)


@dataclass(frozen=True)
class RowSpec:
    key: str
    label: str
    reference: str  # as printed
    reference_value: float | None  # for the ratio (None: no reference figure)
    unit: str
    target: str
    higher_is_better: bool = False


ROWS: list[RowSpec] = [
    RowSpec("ingest_one", "ingest, one message per call, 10k", "2,638 msg/s", 2638, "msg/s",
            "≥ 4,000 (SQLite), ≥ 1,000 (PG)", True),
    RowSpec("pg_commit_floor", "PostgreSQL only: one INSERT + COMMIT (the WAL flush floor)",
            "—", None, "ms", ""),
    RowSpec("ingest_one_async_commit", "PostgreSQL only: ingest one per call with "
            "`synchronous_commit = off` (diagnostic, not durable)", "—", None, "msg/s", "",
            True),
    RowSpec("ingest_batch", "ingest, batches of 100, 10k", "667 msg/s", 667, "msg/s", "", True),
    RowSpec("http_one", "one message through the API and `lcm_serve`, autocompaction on, p50",
            "—", None, "ms", "< 3 ms (PG)"),
    RowSpec("assemble_10k", "assemble, uncompacted 10,000 messages, 128k budget, p50",
            "601 ms", 601, "ms", "≤ 20 ms"),
    RowSpec("assemble_2k", "assemble, uncompacted 2,000 messages, p50", "192 ms", 192, "ms",
            "≤ 5 ms"),
    RowSpec("assembly_500", "assembly, 500 items over 100k messages, anthropic format, p50",
            "—", None, "ms", "< 8 ms (PG, default random_page_cost)"),
    RowSpec("compaction_10k", "full compaction of 10,000 messages", "5.95 s", 5.95, "s",
            "≤ 0.3 s (SQLite)"),
    RowSpec("assemble_compacted", "assemble, compacted 10k conversation, p50", "17.5 ms", 17.5,
            "ms", ""),
    RowSpec("expand_8_leaves", "expand depth 3 with messages, no cap, depth-1 summary over ~8 "
            "leaves, p50", "24.7 ms", 24.7, "ms", "≤ 30 ms"),
    RowSpec("expand_8k", "expand depth 3 with messages, no cap, subtree of ~8,000 messages, p50",
            "177 ms", 177, "ms", "≤ 30 ms"),
    RowSpec("grep_100k", "full-text grep, selective, whole database, 100k+ messages, p50",
            "0.1–0.2 ms", 0.15, "ms", "≤ 0.2 ms (SQLite)"),
    RowSpec("grep_cjk", "full-text grep, 2-character CJK word, whole database (PG 1M, SQLite "
            "100k), p50", "—", None, "ms", "≤ 30 ms (PG), no misses"),
]  # fmt: skip
ROWS_BY_KEY = {row.key: row for row in ROWS}


@dataclass
class Measurement:
    value: float
    detail: str = ""


def _conversation(label: str):
    from benchmarks.conversations import new_conversation

    conversation = new_conversation(f"ref-{label}")
    conversation.token_budget = REFERENCE_BUDGET
    type(conversation).objects.filter(pk=conversation.pk).update(token_budget=REFERENCE_BUDGET)
    return conversation


def _append_batches(conversation, messages, size: int = 1000) -> None:
    from conversations.services import messages_append

    for start in range(0, len(messages), size):
        messages_append(conversation_id=conversation.pk, messages=messages[start : start + size])


def _samples(fn: Callable[[], object], runs: int) -> list[float]:
    fn()  # warm caches and plans
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def _ms(samples: list[float], detail: str = "") -> Measurement:
    spread = f"p95 {percentile(samples, 0.95):.2f} ms, {len(samples)} runs"
    return Measurement(p50(samples), f"{spread}; {detail}" if detail else spread)


def measure_ingest(ctx: BenchContext, out: dict) -> None:
    from conversations.services import messages_append

    count = ctx.n(10_000)
    messages = reference_messages(count, seed=1)
    conversation = _conversation("ingest-one")
    start, cpu = time.perf_counter(), time.process_time()
    for message in messages:
        messages_append(conversation_id=conversation.pk, messages=[message])
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    # This process's CPU per call: what the machine's load does not inflate (on SQLite
    # it includes the database's own work; on PostgreSQL the server's is not in it).
    out["ingest_one"] = Measurement(
        count / seconds,
        f"{count:,} calls in {seconds:.2f} s, autocompaction check and memory indexing "
        f"hook on; this process's CPU {cpu / count * 1e6:,.0f} µs per call "
        f"({count / cpu:,.0f} calls per CPU-second)",
    )
    if connection.vendor == "postgresql":
        _commit_bound(ctx, out, messages)
    # The same 10k (uncompacted: no worker runs here) is the assemble-10k conversation.
    out["_uncompacted_10k"] = conversation

    batch = _conversation("ingest-batch")
    messages = reference_messages(count, seed=2)
    start = time.perf_counter()
    _append_batches(batch, messages, size=100)
    seconds = time.perf_counter() - start
    out["ingest_batch"] = Measurement(count / seconds, f"{count // 100:,} calls of 100")


def _commit_bound(ctx: BenchContext, out: dict, messages) -> None:
    """What bounds one append per call on PostgreSQL: the WAL flush of each commit. The
    floor (one-row INSERT + COMMIT on a scratch table), and the same appends with
    `synchronous_commit = off` for this session only (a diagnostic: not durable, never a
    setting of ours): the difference is the time spent waiting for the disk."""
    from conversations.services import messages_append

    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE IF NOT EXISTS lcm_bench_commit_probe (id bigserial, v text)")
    runs = max(50, ctx.n(500))
    start = time.perf_counter()
    for _ in range(runs):
        with connection.cursor() as cursor:  # autocommit: one statement, one commit
            cursor.execute("INSERT INTO lcm_bench_commit_probe (v) VALUES ('x')")
    floor = (time.perf_counter() - start) / runs * 1000
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        mode = cursor.fetchone()[0]
    out["pg_commit_floor"] = Measurement(floor, f"synchronous_commit={mode}, {runs} commits")
    conversation = _conversation("ingest-async-commit")
    count = min(len(messages), max(100, ctx.n(2_000)))
    with connection.cursor() as cursor:
        cursor.execute("SET synchronous_commit = off")
    try:
        start = time.perf_counter()
        for message in messages[:count]:
            messages_append(conversation_id=conversation.pk, messages=[message])
        seconds = time.perf_counter() - start
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET synchronous_commit")
    out["ingest_one_async_commit"] = Measurement(
        count / seconds, f"{count:,} calls; diagnostic only: commits not waited for"
    )


def measure_assembly(ctx: BenchContext, out: dict) -> None:
    from compaction.assembly import assemble_context

    big = out.pop("_uncompacted_10k")
    runs = max(5, ctx.n(30))
    samples = _samples(
        lambda: assemble_context(conversation=big, token_budget=REFERENCE_BUDGET), runs
    )
    got = assemble_context(conversation=big, token_budget=REFERENCE_BUDGET)
    out["assemble_10k"] = _ms(samples, f"{got.token_estimate:,} tokens assembled")

    small = _conversation("assemble-2k")
    with override_settings(LCM_AUTOCOMPACT_DISABLED=True):
        _append_batches(small, reference_messages(ctx.n(2_000), seed=3))
    samples = _samples(
        lambda: assemble_context(conversation=small, token_budget=REFERENCE_BUDGET), runs * 2
    )
    out["assemble_2k"] = _ms(samples)


def measure_compaction(ctx: BenchContext, out: dict) -> None:
    from compaction.assembly import assemble_context
    from compaction.engine import compact_conversation

    conversation = _conversation("compaction")
    with override_settings(LCM_AUTOCOMPACT_DISABLED=True):
        _append_batches(conversation, reference_messages(ctx.n(10_000), seed=4))
    # Best of 3 on fresh copies would triple the ingest; one run, on a settled database.
    start, cpu = time.perf_counter(), time.process_time()
    result = compact_conversation(
        conversation_id=conversation.pk, mode="full", summarizer=InstantSummarizer()
    )
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    out["compaction_10k"] = Measurement(
        seconds,
        f"{result.passes} passes, {len(result.summaries_created)} summaries, "
        f"{result.tokens_before:,} → {result.tokens_after:,} tokens; this process's CPU "
        f"{cpu:.2f} s",
    )
    samples = _samples(
        lambda: assemble_context(conversation=conversation, token_budget=REFERENCE_BUDGET),
        max(10, ctx.n(100)),
    )
    out["assemble_compacted"] = _ms(samples)
    out["_compacted"] = conversation


def measure_expand(ctx: BenchContext, out: dict) -> None:
    from benchmarks.conversations import bench_user
    from conversations.models import Summary
    from retrieval import selectors

    conversation = out.pop("_compacted")
    user = bench_user()
    candidates = []
    for summary in Summary.objects.filter(conversation=conversation, depth__gte=1):
        manifest = selectors.summary_manifest(summary_id=summary.id)
        leaves = sum(s["count"] for s in manifest["summaries_by_depth"] if s["depth"] == 0)
        candidates.append((summary, leaves, manifest["message_count"]))
    if not candidates:
        return

    def expand(summary_id):
        return lambda: selectors.expand_for_user(
            user=user, summary_id=summary_id, depth=3, include_messages=True, token_cap=10**8
        )

    runs = max(5, ctx.n(20))
    eight = min(candidates, key=lambda c: (abs(c[1] - 8), c[0].depth))
    summary, leaves, messages = eight
    out["expand_8_leaves"] = _ms(
        _samples(expand(summary.id), runs),
        f"depth-{summary.depth} summary, {leaves} leaves, {messages:,} messages",
    )
    big = min(candidates, key=lambda c: abs(c[2] - 8_000))
    summary, leaves, messages = big
    out["expand_8k"] = _ms(
        _samples(expand(summary.id), runs),
        f"depth-{summary.depth} summary, {leaves} leaves, {messages:,} messages",
    )


def measure_history(ctx: BenchContext, out: dict) -> None:
    """100k messages of the workload in one conversation: the 500-item anthropic assembly
    (shaped into 450 leaves + 50 raw, as `benchmarks.compaction` does) and the whole-database
    grep (every conversation of the run is in scope)."""
    from benchmarks.compaction import _shape_context
    from benchmarks.conversations import bench_user
    from compaction.assembly import assemble_context, clear_summary_cache
    from conversations.models import Message
    from retrieval.grep import GrepRequest, grep_for_user

    count = ctx.n(100_000)
    conversation = _conversation("history")
    with override_settings(LCM_AUTOCOMPACT_DISABLED=True):
        for start in range(0, count, 10_000):
            _append_batches(
                conversation, reference_messages(min(10_000, count - start), seed=5, start=start)
            )
        _shape_context(conversation, leaves=450, raw_tail=50)
    with connection.cursor() as cursor:
        for table in ("conversations_contextitem", "conversations_message",
                      "conversations_messagepart"):  # fmt: skip
            cursor.execute(("VACUUM ANALYZE " if connection.vendor == "postgresql" else
                            "ANALYZE ") + table)  # fmt: skip
    clear_summary_cache()
    samples = _samples(
        lambda: assemble_context(conversation=conversation, token_budget=10**7, fmt="anthropic"),
        max(10, ctx.n(100)),
    )
    out["assembly_500"] = _ms(samples)

    user = bench_user()
    total = Message.objects.count()
    # A ticket number of the workload: one user message in the 100k conversation.
    needle = f"{10_000 + count // 8}"
    request = GrepRequest(query=needle, mode="full_text", scope="messages")
    hits = len(grep_for_user(user=user, request=request))
    out["grep_100k"] = _ms(
        _samples(lambda: grep_for_user(user=user, request=request), max(20, ctx.n(200))),
        f"{hits} hit(s) for {needle!r} over {total:,} messages",
    )


def measure_cjk(ctx: BenchContext, out: dict) -> None:
    """The retrieval benchmark's set (1M on PostgreSQL, 100k on SQLite; built once, kept)."""
    from benchmarks.conversations import bench_user
    from benchmarks.retrieval import _bulk_set
    from conversations.models import Message
    from retrieval.grep import GrepRequest, grep_for_user

    _bulk_set(ctx)
    user = bench_user()
    request = GrepRequest(query="缓存", mode="full_text", scope="messages")
    hits = len(grep_for_user(user=user, request=request))
    out["grep_cjk"] = _ms(
        _samples(lambda: grep_for_user(user=user, request=request), 5),
        f"{hits} hit(s) over {Message.objects.count():,} messages",
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def measure_http(ctx: BenchContext, out: dict) -> None:
    """POST one message at a time to a real `lcm_serve` (uvicorn + the qcluster worker,
    autocompaction on) on this database, timed by the client on one keep-alive
    connection: what an SDK sees."""
    from benchmarks.conversations import bench_user
    from tokens.services import token_rotate

    user = bench_user()
    token = token_rotate(user=user, name="bench")
    conversation = _conversation("http")
    port = _free_port()
    env = dict(os.environ)
    env.update({name: str(value) for name, value in REFERENCE_SETTINGS.items()})
    env["LCM_AUTOCOMPACT_DISABLED"] = "0"
    # The worker would embed every message for semantic memory, on the same 2 cores as
    # the server and the client; the enqueue itself stays in the in-process ingest rows.
    env["LCM_MEMORY_INDEX_MESSAGES"] = "0"
    db = settings.DATABASES["default"]
    if connection.vendor == "sqlite":
        env.pop("LCM_DATABASE_URL", None)
        env.pop("DATABASE_URL", None)
        env["LCM_DATA_DIR"] = str(Path(db["NAME"]).parent)
    manage = Path(settings.BASE_DIR) / "manage.py"
    server = subprocess.Popen(
        [sys.executable, str(manage), "lcm_serve", "--no-demo", "--no-migrate",
         "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                probe = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                probe.request("GET", "/api/v1/conversations/")  # any answer: up
                probe.getresponse().read()
                probe.close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("lcm_serve did not start") from None
                time.sleep(0.2)
        client = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        headers = {"Authorization": f"Token {token.key}", "Content-Type": "application/json"}
        path = f"/api/v1/conversations/{conversation.pk}/messages/"
        count = ctx.n(2_000)
        samples = []
        for body in reference_payloads(count, seed=6):
            data = json.dumps(body)
            start = time.perf_counter()
            client.request("POST", path, data, headers)
            response = client.getresponse()
            payload = response.read()
            samples.append((time.perf_counter() - start) * 1000)
            if response.status != 201:
                raise RuntimeError(f"HTTP {response.status}: {payload[:300]!r}")
        client.close()
        from compaction.models import CompactionJob

        jobs = CompactionJob.objects.filter(conversation_id=conversation.pk).count()
        out["http_one"] = _ms(
            samples,
            f"{count:,} requests, one keep-alive connection; {jobs} compaction job(s) run "
            "by the server's worker meanwhile; memory indexing off",
        )
    finally:
        os.killpg(server.pid, 15)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, 9)
            server.wait(10)


STEPS = {
    "ingest": measure_ingest,
    "assembly": measure_assembly,
    "compaction": measure_compaction,
    "expand": measure_expand,
    "history": measure_history,
    "cjk": measure_cjk,
    "http": measure_http,
}


def measure_all(ctx: BenchContext, steps: list[str] | None = None, log=print) -> dict:
    """Every row on the configured database, under the reference settings."""
    out: dict = {}
    chosen = steps or list(STEPS)
    # assembly reads the conversation ingest built; expand reads compaction's.
    if "assembly" in chosen and "ingest" not in chosen:
        chosen.insert(0, "ingest")
    if "expand" in chosen and "compaction" not in chosen:
        chosen.insert(chosen.index("expand"), "compaction")
    with override_settings(**REFERENCE_SETTINGS):
        for step in STEPS:
            if step in chosen:
                log(f"{connection.vendor}: {step} ...")
                start = time.perf_counter()
                try:
                    STEPS[step](ctx, out)
                except Exception:  # the other rows are still worth printing
                    log(f"{connection.vendor}: {step} FAILED\n{traceback.format_exc()}")
                    out[f"_failed_{step}"] = True
                    continue
                log(f"{connection.vendor}: {step} done in {time.perf_counter() - start:.1f} s")
    return {k: v for k, v in out.items() if not k.startswith("_")}


def _figure(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _ratio(spec: RowSpec, value: float | None) -> str:
    if value is None or not spec.reference_value:
        return ""
    ratio = value / spec.reference_value if spec.higher_is_better else spec.reference_value / value
    return f"{ratio:,.1f}×" if ratio >= 1 else f"{ratio:.2f}×"


def render_reference_table(results: dict[str, dict[str, dict]], machine: str, load: str) -> str:
    """One row per issue row: the reference, ours per database with the ratio (how many
    times better than the reference), the target. `results`: vendor -> key -> measurement."""
    vendors = [v for v in ("sqlite", "postgresql") if v in results]
    names = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}
    header = (
        "| row | reference | "
        + " | ".join(f"ours, {names[v]} | ratio" for v in vendors)
        + " | target |"
    )
    lines = [header, "|---|---:|" + "---:|---:|" * len(vendors) + "---|"]
    details = []
    for spec in ROWS:
        cells = []
        for vendor in vendors:
            m = results[vendor].get(spec.key)
            value = m["value"] if m else None
            cells.append("—" if value is None else f"{_figure(value)} {spec.unit}")
            cells.append(_ratio(spec, value))
            if m and m.get("detail"):
                details.append(f"- {spec.label}, {names[vendor]}: {m['detail']}")
        lines.append(f"| {spec.label} | {spec.reference} | " + " | ".join(cells) +
                     f" | {spec.target} |")  # fmt: skip
    shape = workload_shape()
    head = (
        f"Machine: {machine}; load average {load}. Workload: {shape['avg_chars']:.0f} chars and "
        f"{shape['avg_tokens']:.1f} estimated tokens per message on average, all unique. "
        "Ratio: how many times better than the reference (higher is better)."
    )
    return "\n".join([head, "", *lines, "", *details])


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def child_database_env(vendor: str, *, postgres_url: str | None, data_dir: str) -> dict:
    env = dict(os.environ)
    env["LCM_DATA_DIR"] = data_dir
    env.pop("DATABASE_URL", None)
    if vendor == "postgresql":
        env["LCM_DATABASE_URL"] = postgres_url or ""
    else:
        env.pop("LCM_DATABASE_URL", None)
    return env


def ensure_postgres_database(url: str) -> None:
    """Create the scratch database if it is missing (connecting to `postgres`)."""
    import psycopg
    from psycopg import sql

    name = url.rsplit("/", 1)[1].split("?")[0]
    admin = url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def new_label() -> str:
    return uuid.uuid4().hex[:8]
