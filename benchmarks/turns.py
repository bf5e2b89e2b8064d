"""Turn engine benchmarks (`manage.py lcm_bench --only turns --only turn_streams`).

- `turns` (in-process): the engine's own cost per turn with the offline provider (context
  assembly, TX-0/TX-A, the journal, the event log, the mirror into the LCM store; the
  provider's streaming time is subtracted), and a fork of a 10-turn branch against a fork
  of a branch with 10,000 turns of history.
- `turn_streams` (over HTTP, against `lcm_serve` started as a child process on a free
  port with this database): time to the first SSE byte and to the first delta, a replay
  of a finished turn from its log, and 50 concurrent streaming turns against the latency
  of another endpoint, with the server's resident memory.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from django.conf import settings
from django.db import connection, transaction

from benchmarks.conversations import bench_user
from benchmarks.harness import BenchContext, BenchRow, benchmark, p50, percentile
from conversations.inputs import MessageInput
from conversations.services import messages_append
from tokens.services import token_rotate
from turns import runner, services
from turns.branches import branch_fork
from turns.jobs import commit_pending
from turns.models import Phase, StateCheckpoint, StateReason, UserTurn


@benchmark("turns")
def turns(ctx: BenchContext) -> list[BenchRow]:
    user = bench_user()
    session = services.session_create(owner=user, title="bench turns", default_model="offline")
    overhead = []
    bounded = 0
    for i in range(ctx.n(200)):
        session.refresh_from_db()
        start = time.perf_counter()
        turn = services.turn_accept(
            session=session,
            branch=session.active_branch,
            content=f"turn {i}: we decided to keep src/module_{i}.py and ticket RA-{i:04d}",
        )
        turn = runner.run_turn(turn_id=turn.id)
        total_ms = (time.perf_counter() - start) * 1000
        stream_ms = (turn.telemetry.get("latency_ms") or {}).get("stream_ms", 0.0)
        overhead.append(total_ms - stream_ms)
        bounded = max(bounded, sum((turn.context or {}).get("sections_tokens", {}).values()))
        if i % 10 == 9:
            commit_pending(branch=session.active_branch)
    rows = [
        BenchRow(
            "turn overhead excluding the provider (offline), p50",
            p50(overhead),
            "ms",
            "",
            f"p95 {percentile(overhead, 0.95):.1f} ms, {len(overhead)} turns; "
            f"largest context {bounded:,} tokens",
        )
    ]
    small = _branch_with_history(user, turns=10)
    large = _branch_with_history(user, turns=ctx.n(10_000))
    for branch, label in ((small, "10 turns"), (large, f"{ctx.n(10_000):,} turns")):
        samples = []
        for _ in range(20):
            start = time.perf_counter()
            branch_fork(branch=branch)
            samples.append((time.perf_counter() - start) * 1000)
        rows.append(
            BenchRow(
                f"fork of a branch with {label} of history, p50",
                p50(samples),
                "ms",
                "same for both",
                f"p95 {percentile(samples, 0.95):.1f} ms",
            )
        )
    return rows


def _branch_with_history(user, *, turns: int):
    """A branch whose history holds `turns` committed turns (rows written in bulk)."""
    session = services.session_create(owner=user, title=f"bench fork {turns}")
    session.refresh_from_db()
    branch = session.active_branch
    initial = StateCheckpoint.objects.get(pk=branch.head_state_id)
    batch = 1000
    for start in range(0, turns * 2, batch):
        messages_append(
            conversation_id=branch.conversation_id,
            messages=[
                MessageInput(
                    role="user" if n % 2 == 0 else "assistant",
                    content=f"history message {n} about src/file_{n}.py",
                )
                for n in range(start, min(start + batch, turns * 2))
            ],
        )
    with transaction.atomic():
        states = StateCheckpoint.objects.bulk_create(
            StateCheckpoint(
                session=session,
                branch=branch,
                state_seq=seq,
                summary=f"state {seq}",
                pinned_facts=[],
                token_count_est=3,
                reason=StateReason.TURN,
            )
            for seq in range(1, turns + 1)
        )
        previous = [initial, *states]
        UserTurn.objects.bulk_create(
            UserTurn(
                session=session,
                branch=branch,
                turn_seq=seq,
                state_before=previous[seq - 1],
                state_after=previous[seq],
                phase=Phase.DONE,
                user_message={"role": "user", "blocks": [], "rendered_text": f"q{seq}"},
                final_assistant_message={
                    "role": "assistant",
                    "blocks": [],
                    "rendered_text": f"a{seq}",
                },
                primary_provider="offline",
                primary_model="offline",
            )
            for seq in range(1, turns + 1)
        )
        type(branch).objects.filter(pk=branch.pk).update(
            head_state=states[-1], head_seq=turns, last_turn_seq=turns
        )
    branch.refresh_from_db()
    return branch


# Over HTTP ---------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _database_url() -> str:
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    host = db["HOST"] or "127.0.0.1"
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return f"postgres://{db['USER']}{password}@{host}:{db['PORT'] or 5432}/{db['NAME']}"


class _Server:
    def __init__(self, **env: str) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        environment = dict(os.environ)
        environment.update(
            LCM_DATABASE_URL=_database_url(),
            LCM_DATA_DIR=str(settings.DATA_DIR),
            PYTHONUNBUFFERED="1",
            **env,
        )
        manage = Path(settings.BASE_DIR) / "manage.py"
        self.process = subprocess.Popen(
            [
                sys.executable,
                str(manage),
                "lcm_serve",
                "--no-worker",
                "--no-demo",
                "--no-migrate",
                "--port",
                str(self.port),
            ],
            env=environment,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def wait(self, client) -> None:
        for _ in range(300):
            try:
                client.get(self.url + "/api/v1/models/")
                return
            except Exception:
                time.sleep(0.1)
        raise RuntimeError("lcm_serve did not come up")

    def rss_mb(self) -> float:
        with open(f"/proc/{self.process.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()


def _session(client, url, headers) -> str:
    response = client.post(
        url + "/api/v1/sessions/",
        json={"title": "bench", "default_model": "offline"},
        headers=headers,
    )
    response.raise_for_status()
    return response.json()["id"]


@benchmark("turn_streams")
def turn_streams(ctx: BenchContext) -> list[BenchRow]:
    import httpx2 as httpx

    user = bench_user()
    token = token_rotate(user=user, name="bench")
    headers = {"Authorization": f"Token {token.key}"}
    rows: list[BenchRow] = []
    # Long answers: 200 deltas 50 ms apart (10 s a turn) keep 50 streams open together.
    server = _Server(LCM_OFFLINE_STREAM_CHUNKS="200", LCM_OFFLINE_STREAM_DELAY_MS="50")
    with httpx.Client(timeout=120) as client:
        try:
            server.wait(client)
            first_byte, first_delta, replay = [], [], []
            for _ in range(ctx.n(10)):
                sid = _session(client, server.url, headers)
                start = time.perf_counter()
                with client.stream(
                    "POST",
                    f"{server.url}/api/v1/sessions/{sid}/turns/",
                    json={"content": "hello", "stream": True},
                    headers=headers,
                ) as response:
                    lines = response.iter_lines()
                    next(lines)
                    first_byte.append((time.perf_counter() - start) * 1000)
                    turn_id = None
                    for line in lines:
                        if turn_id is None and line.startswith("data:") and "turn_id" in line:
                            turn_id = line.split('"turn_id":"')[1].split('"')[0]
                        if line == "event: delta" and len(first_delta) < len(first_byte):
                            first_delta.append((time.perf_counter() - start) * 1000)
                            break
                # Let it finish, then replay the whole turn from its log.
                while client.get(f"{server.url}/api/v1/turns/{turn_id}/", headers=headers).json()[
                    "phase"
                ] in ("accepted", "context_prepared", "responding"):
                    time.sleep(0.2)
                start = time.perf_counter()
                events = 0
                with client.stream(
                    "GET", f"{server.url}/api/v1/turns/{turn_id}/stream/", headers=headers
                ) as response:
                    for line in response.iter_lines():
                        events += line.startswith("id:")
                replay.append((time.perf_counter() - start) * 1000)
            rows += [
                BenchRow(
                    "time to first SSE byte (POST turn, stream), p50",
                    p50(first_byte),
                    "ms",
                    "",
                    f"p95 {percentile(first_byte, 0.95):.1f} ms",
                ),
                BenchRow(
                    "time to first delta (offline provider), p50",
                    p50(first_delta),
                    "ms",
                    "",
                    f"p95 {percentile(first_delta, 0.95):.1f} ms",
                ),
                BenchRow(
                    f"resume: replay a finished turn from its log ({events} events), p50",
                    p50(replay),
                    "ms",
                    "",
                    f"p95 {percentile(replay, 0.95):.1f} ms",
                ),
            ]
            rows += _concurrent(client, server, headers, ctx)
        finally:
            server.stop()
    return rows


def _other_endpoint(client, server, headers, samples: list[float], stop: threading.Event):
    while not stop.is_set():
        start = time.perf_counter()
        response = client.get(f"{server.url}/api/v1/conversations/?limit=20", headers=headers)
        samples.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200
        time.sleep(0.02)


def _concurrent(client, server, headers, ctx) -> list[BenchRow]:
    import httpx2 as httpx

    baseline: list[float] = []
    stop = threading.Event()
    probe = threading.Thread(target=_other_endpoint, args=(client, server, headers, baseline, stop))
    probe.start()
    time.sleep(3)
    stop.set()
    probe.join()

    streams = 50
    sessions = [_session(client, server.url, headers) for _ in range(streams)]
    done = []
    errors = []

    def stream(sid):
        try:
            with (
                httpx.Client(timeout=120) as own,
                own.stream(
                    "POST",
                    f"{server.url}/api/v1/sessions/{sid}/turns/",
                    json={"content": "a long answer please", "stream": True},
                    headers=headers,
                ) as response,
            ):
                last = ""
                for line in response.iter_lines():
                    if line.startswith("event:"):
                        last = line
                done.append(last)
        except Exception as error:  # counted, reported
            errors.append(repr(error))

    threads = [threading.Thread(target=stream, args=(sid,)) for sid in sessions]
    for thread in threads:
        thread.start()
    time.sleep(2)  # all 50 streaming
    loaded: list[float] = []
    stop = threading.Event()
    probe = threading.Thread(target=_other_endpoint, args=(client, server, headers, loaded, stop))
    probe.start()
    peak = 0.0
    while any(t.is_alive() for t in threads):
        peak = max(peak, server.rss_mb())
        time.sleep(0.25)
        if len(done) + len(errors) >= streams * 0.9:
            break
    stop.set()
    probe.join()
    for thread in threads:
        thread.join(60)
    completed = sum(1 for last in done if last == "event: done")
    return [
        BenchRow(
            "other endpoint (GET conversations) alone, p50",
            p50(baseline),
            "ms",
            "",
            f"p99 {percentile(baseline, 0.99):.1f} ms, {len(baseline)} requests",
        ),
        BenchRow(
            f"same, during {streams} concurrent streaming turns, p50",
            p50(loaded),
            "ms",
            "about the same as alone",
            f"p99 {percentile(loaded, 0.99):.1f} ms, {len(loaded)} requests; "
            f"{completed}/{streams} streams done, {len(errors)} errors",
        ),
        BenchRow(
            f"server resident memory with {streams} streams, peak",
            peak,
            "MB",
            "< 600 MB",
            "VmRSS of the lcm_serve process",
        ),
    ]
