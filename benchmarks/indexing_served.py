"""Indexing as users run it (issue 43, item 8): the served app (`lcm_serve`, uvicorn and its
qcluster worker, default settings) on the configured database, messages POSTed through the
public API, and the clock running until every conversation is indexed.

Two workloads:
- `beam6`: six long chats, each three BEAM-100K conversations back to back (1-3, 4-6, ...,
  16-18; ../shared/datasets), POSTed in batches of 50 round-robin. The figure: seconds
  from the end of ingest to every message indexed. Beside it, what the model alone takes
  for the same units (one process, one call per 2,000 units, as a worker embeds them) and
  the workers' CPU time, so the model's share is known.
- `lag30k`: 20 conversations of 1,500 reference-workload messages (30,000; agent turns
  with tool calls), POSTed in batches of 50 round-robin as fast as one client goes;
  /metrics' indexing lag sampled every 5 s (conversations behind, oldest unindexed
  message's age), and the seconds from the end of ingest to every message indexed.

Progress is read from the database (a conversation's last seq against its indexing
cursor), so the same module measures a build without the lag metrics. Writes under a user
'lcm-bench-served': use a scratch database.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.db import connection

from benchmarks.harness import BenchContext, BenchRow, benchmark

BATCH = 50
_WAIT_SECONDS = 3600  # LCM_BENCH_INDEXING_WAIT overrides


class _Served:
    """`lcm_serve --no-demo --no-migrate` with its worker, on a free port."""

    def __init__(self) -> None:
        from benchmarks.reference import _free_port

        self.port = int(os.environ.get("LCM_BENCH_PORT") or _free_port())
        env = dict(os.environ)
        if connection.vendor == "sqlite":
            env.pop("LCM_DATABASE_URL", None)
            env.pop("DATABASE_URL", None)
            env["LCM_DATA_DIR"] = str(Path(settings.DATABASES["default"]["NAME"]).parent)
        manage = Path(settings.BASE_DIR) / "manage.py"
        log = open(Path(settings.DATA_DIR) / f"bench-served-{self.port}.log", "ab")  # noqa: SIM115
        self.process = subprocess.Popen(
            [sys.executable, str(manage), "lcm_serve", "--no-demo", "--no-migrate",
             "--port", str(self.port)],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while not self._up():
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError("lcm_serve did not start")
            time.sleep(0.2)
        while len(self.workers()) < 4 and time.monotonic() < deadline:
            time.sleep(0.2)  # the cluster's processes (sentinel, workers, pusher, monitor)

    def _up(self) -> bool:
        try:
            probe = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
            probe.request("GET", "/api/v1/models/")
            probe.getresponse().read()
            probe.close()
        except OSError:
            return False
        return True

    def workers(self) -> list[int]:
        """The qcluster processes (the server's descendants named so)."""
        from workers.management.commands.qcluster import _descendants

        found = []
        for pid in _descendants(self.process.pid):
            try:
                if b"qcluster" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    found.append(pid)
            except OSError:
                continue
        return found

    def stop(self) -> None:
        import signal

        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)


class _Client:
    def __init__(self, port: int, token: str) -> None:
        self.port = port
        self.http = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        self.headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}

    def post(self, path: str, body) -> dict:
        self.http.request("POST", path, json.dumps(body), self.headers)
        response = self.http.getresponse()
        payload = response.read()
        if response.status >= 300:
            raise RuntimeError(f"POST {path}: HTTP {response.status} {payload[:300]!r}")
        return json.loads(payload)

    def metrics(self) -> dict[str, float]:
        probe = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        probe.request("GET", "/metrics")
        text = probe.getresponse().read().decode()
        probe.close()
        return {
            name: float(value)
            for name, value in re.findall(r"^(lcm_memory_index_\w+) (\S+)$", text, re.M)
        }


def _behind(conversation_ids: list[int]) -> tuple[int, int]:
    """(conversations behind, messages behind) among these, read from the database."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COUNT(*), COALESCE(SUM(c.last_seq - COALESCE(k.last_seq, 0)), 0)"
            " FROM conversations_conversation c"
            " LEFT JOIN memory_messageindexcursor k ON k.conversation_id = c.id"
            f" WHERE c.id IN ({', '.join(['%s'] * len(conversation_ids))})"
            " AND c.last_seq > COALESCE(k.last_seq, 0)",
            conversation_ids,
        )
        count, messages = cursor.fetchone()
    return int(count), int(messages)


def _cpu_seconds(pids: list[int]) -> dict[int, float]:
    """CPU seconds so far of each live process, with its reaped children's (a worker that
    django-q replaced counts in its sentinel's)."""
    ticks = os.sysconf("SC_CLK_TCK")
    seconds = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        seconds[pid] = sum(int(value) for value in fields[11:15]) / ticks
    return seconds


def _cpu_since(server: _Served, before: dict[int, float]) -> float:
    """The workers' CPU seconds since `before` (a worker started meanwhile counts whole)."""
    now = _cpu_seconds(server.workers())
    return sum(value - before.get(pid, 0.0) for pid, value in now.items())


def _ingest(client: _Client, chats: dict[str, list[dict]], on_batch=None) -> dict[str, int]:
    """Each chat into its own conversation, BATCH messages per POST, round-robin."""
    ids = {
        name: client.post("/api/v1/conversations/", {"session_id": name})["id"] for name in chats
    }
    longest = max(len(messages) for messages in chats.values())
    for start in range(0, longest, BATCH):
        for name, messages in chats.items():
            if start < len(messages):
                path = f"/api/v1/conversations/{ids[name]}/messages/"
                client.post(path, {"messages": messages[start : start + BATCH]})
        if on_batch:
            on_batch()
    return ids


def _wait_indexed(ids: list[int], sample=None, every: float = 1.0) -> tuple[float, int]:
    """Seconds until every message of these conversations is indexed, and the messages
    still behind when LCM_BENCH_INDEXING_WAIT seconds (3,600) ran out first (0: all)."""
    started = time.monotonic()
    limit = float(os.environ.get("LCM_BENCH_INDEXING_WAIT") or _WAIT_SECONDS)
    while (behind := _behind(ids))[0]:
        if time.monotonic() - started > limit:
            return time.monotonic() - started, behind[1]
        if sample:
            sample()
        time.sleep(every)
    return time.monotonic() - started, 0


def _token() -> str:
    from django.contrib.auth import get_user_model

    from tokens.services import token_rotate

    user, _ = get_user_model().objects.get_or_create(username="lcm-bench-served")
    return token_rotate(user=user, name=f"served-{time.time_ns()}").key


def beam_chats(shared: Path) -> dict[str, list[dict]]:
    """Six chats, each three BEAM-100K conversations back to back (1-18)."""
    from benchmarks.recall_eval import load_beam

    conversations = load_beam(shared / "datasets" / "beam-100k")
    by_number = {c.name: c for c in conversations}
    chats = {}
    label = time.time_ns()
    for chat in range(6):
        messages = []
        for number in range(3 * chat + 1, 3 * chat + 4):
            messages += [
                {"role": m.role, "content": m.content} for m in by_number[f"beam-{number}"].messages
            ]
        chats[f"beam6-{label}-{chat}"] = messages
    return chats


def _model_seconds(conversation_ids: list[int]) -> tuple[float, float, int]:
    """What the default model alone takes for the units these conversations were cut
    into, one process, calls of 2,000 units: (CPU seconds, wall seconds, units). The CPU
    seconds are what to set against the workers' CPU: on a shared machine the wall time
    says more about the other processes than about the model."""
    from memory.embeddings import active_backend
    from memory.models import Chunk

    texts = list(
        Chunk.objects.filter(conversation_id__in=conversation_ids, lexical_only__isnull=True)
        .order_by("conversation_id", "seq_start", "start_offset")
        .values_list("rendered_text", flat=True)
    )
    backend = active_backend()
    backend.embed(["warm up"])
    cpu, wall = time.process_time(), time.perf_counter()
    for start in range(0, len(texts), 2000):
        backend.embed(texts[start : start + 2000])
    return time.process_time() - cpu, time.perf_counter() - wall, len(texts)


@benchmark("indexing_served")
def indexing_served(ctx: BenchContext) -> list[BenchRow]:
    from benchmarks.embeddings import shared_dir

    shared = shared_dir()
    if shared is None:
        ctx.notes.append("indexing_served: no ../shared datasets; skipped")
        return []
    chats = beam_chats(shared)
    if ctx.scale < 1:
        chats = {k: v[: max(1, int(len(v) * ctx.scale))] for k, v in chats.items()}
    load_before = os.getloadavg()[0]
    server = _Served()
    try:
        client = _Client(server.port, _token())
        cpu_before = _cpu_seconds(server.workers())
        started = time.monotonic()
        ids = list(_ingest(client, chats).values())
        ingest_seconds = time.monotonic() - started
        after_ingest, left = _wait_indexed(ids)
        worker_cpu = _cpu_since(server, cpu_before)
    finally:
        server.stop()
    load_after = os.getloadavg()[0]
    model_cpu, model_wall, units = _model_seconds(ids)
    messages = sum(len(v) for v in chats.values())
    detail = (
        f"{messages:,} messages, {units:,} embedded units; ingest {ingest_seconds:.1f} s; "
        f"workers' CPU {worker_cpu:.0f} s; load {load_before:.1f} -> {load_after:.1f}"
        + (f"; NOT FINISHED: {left:,} messages behind" if left else "")
    )
    share = f"; {model_cpu / worker_cpu:.0%} of the workers' CPU" if worker_cpu else ""
    return [
        BenchRow("indexing_served: six BEAM chats, ingest end -> all indexed", after_ingest,
                 "s", "<= 185 s", detail),
        BenchRow("indexing_served: the model alone on the same units (one process), CPU",
                 model_cpu, "s", "", f"{units / model_cpu:.0f} units per CPU second, wall "
                 f"{model_wall:.0f} s{share}"),
    ]  # fmt: skip


@benchmark("indexing_lag")
def indexing_lag(ctx: BenchContext) -> list[BenchRow]:
    from benchmarks.reference_workload import reference_payloads

    per = ctx.n(1500)
    label = time.time_ns()
    chats = {f"lag-{label}-{i}": reference_payloads(per, seed=i) for i in range(20)}
    load_before = os.getloadavg()[0]
    server = _Served()
    samples: list[dict[str, float]] = []
    last_sample = [0.0]
    try:
        client = _Client(server.port, _token())

        def sample() -> None:
            if time.monotonic() - last_sample[0] >= 5:
                last_sample[0] = time.monotonic()
                samples.append(client.metrics())

        started = time.monotonic()
        ids = list(_ingest(client, chats, on_batch=sample).values())
        ingest_seconds = time.monotonic() - started
        at_end = client.metrics()
        after_ingest, left = _wait_indexed(ids, sample=sample)
        finally_ = client.metrics()
    finally:
        server.stop()
    load_after = os.getloadavg()[0]
    oldest = [s.get("lcm_memory_index_oldest_unindexed_seconds", 0.0) for s in samples]
    behind = [s.get("lcm_memory_index_conversations_behind", 0.0) for s in samples]
    detail = (
        f"{20 * per:,} messages in {ingest_seconds:.0f} s; load {load_before:.1f} -> "
        f"{load_after:.1f}; /metrics after: {finally_}"
        + (f"; NOT FINISHED: {left:,} messages behind" if left else "")
    )
    return [
        BenchRow("indexing_lag: 30k messages, ingest end -> all indexed", after_ingest, "s",
                 "", detail),
        BenchRow("indexing_lag: oldest unindexed message at the end of ingest",
                 at_end.get("lcm_memory_index_oldest_unindexed_seconds", float("nan")), "s",
                 "", f"conversations behind then: "
                 f"{at_end.get('lcm_memory_index_conversations_behind', float('nan')):.0f}"),
        BenchRow("indexing_lag: oldest unindexed message, peak of the 5 s samples",
                 max(oldest, default=float("nan")), "s", "",
                 f"conversations behind, peak {max(behind, default=float('nan')):.0f}"),
    ]  # fmt: skip
