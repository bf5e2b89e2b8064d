"""The prompt cache as users run the product (issue 46): `lcm_bench --only cache_served`.

Per model window (16k, 32k, 200k; LCM_BENCH_CACHE_WINDOWS picks them) a real `lcm_serve`
(uvicorn and its background worker with the urgent queue, default settings, memory
indexing and retrieval on) on a fresh data directory (SQLite, the default), with
ANTHROPIC_API_KEY set and ANTHROPIC_BASE_URL pointing at a local recording upstream that
speaks the Messages wire. So the turns (the built-in `sonnet` model, `context_limit` = the
window), the compaction summaries (the default LCM_SUMMARY_MODEL on Anthropic) and the
librarian (the default `haiku` model) all call it, as they would call Anthropic. Through
the public API, for each of `lcm`, `state` and the stateless drop-in client
(`POST /anthropic/v1/messages`, the whole history each time): 150 turns of ~450 tokens
(benchmarks/cost.py's `_turn_text`), one at a time, each timed (turn latency).

The upstream (`ServedUpstream`) answers every request it gets: a turn with the answer of
the turn it names, a summary with `recording_upstream.compose` (what a careless model
writes), the librarian likewise. It replays Anthropic's cache rule on every request
(tests/support/fake_prompt_cache.py: breakpoints, 20-block lookback, 1,024-token minimum,
4,096 for Haiku 4.5) and counts each by kind. The figure: cache-read input over all input
of the last two thirds of the turn requests, as in benchmarks/cost.py's window rows,
which run beside it (offline and synchronous: in process, the state committed and
compaction run after every turn, no indexing, the offline summarizer).
"""

from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from benchmarks.cost import WINDOW_TARGETS, WINDOWS, _turn_text
from benchmarks.harness import BenchContext, BenchRow, benchmark, percentile
from providers.caching import billed_input

_TAG = re.compile(r"\[bench:([\w-]+)\]")
# The user's pause between an answer and the next message (LCM_BENCH_CACHE_PAUSE, seconds):
# the fake upstream answers at once, a model and a reader do not.
PAUSE_SECONDS = float(os.environ.get("LCM_BENCH_CACHE_PAUSE", "1.0"))
_TURN = re.compile(r"Turn (\d+):")


@dataclass
class Record:
    tag: str
    kind: str  # turn | summary | librarian
    usage: dict


@dataclass
class Phase:
    """One strategy's run on one window: what the upstream counted, and the latencies."""

    tag: str
    latencies_ms: list[float] = field(default_factory=list)
    compacted: int = 0


def _system_text(body: dict) -> str:
    system = body.get("system") or ""
    if isinstance(system, list):
        return "\n".join(b.get("text", "") for b in system if isinstance(b, dict))
    return system


def _last_user_text(body: dict) -> str:
    for message in reversed(body.get("messages") or []):
        if message.get("role") != "user":
            continue
        content = message["content"]
        if isinstance(content, str):
            return content
        return "\n".join(b.get("text", "") for b in content if b.get("type") == "text")
    return ""


def make_upstream():
    """The recording upstream (a FakeMessagesAPI that answers by itself)."""
    from benchmarks.recording_upstream import compose
    from compaction.summarizers.prompts import SYSTEM_PROMPT
    from tests.support.fake_messages_api import (
        FakeMessagesAPI,
        anthropic_text_stream,
        message,
    )
    from turns.librarian import LIBRARIAN_SYSTEM, SHRINK_SYSTEM

    class ServedUpstream(FakeMessagesAPI):
        def __init__(self) -> None:
            super().__init__(prompt_cache=True)
            self.records: list[Record] = []
            self.record_lock = threading.Lock()

        def _record_and_pick(self, request):
            refused = self.invalid(request)
            if refused is not None:
                return refused
            body = request.body
            system = _system_text(body)
            prompt = _last_user_text(body)
            if system.startswith(SYSTEM_PROMPT[:60]):
                kind, text = "summary", compose(prompt)
            elif system.startswith((LIBRARIAN_SYSTEM[:60], SHRINK_SYSTEM[:60])):
                kind, text = "librarian", compose(prompt) or "Nothing to keep."
            else:
                numbers = _TURN.findall(prompt)
                n = int(numbers[-1]) if numbers else 0
                kind, text = "turn", _turn_text(n)[1]
            scripted = anthropic_text_stream(text) if body.get("stream") else message(text)
            spent = self.prompt_cache.usage(body)
            tag = _TAG.search(json.dumps(body.get("messages") or []))
            with self.record_lock:
                self.records.append(Record(tag.group(1) if tag else "", kind, spent))
            self.cache_reports.append(spent)
            return self._with_usage(scripted, spent)

        def _with_usage(self, scripted, spent):
            import copy
            import dataclasses

            from tests.support.fake_http import SSE

            if scripted.events is not None:
                events = []
                for event in scripted.events:
                    data = event.data
                    if event.event == "message_start" and isinstance(data, dict):
                        data = copy.deepcopy(data)
                        data["message"]["usage"].update(spent)
                    events.append(SSE(event.event, data))
                return dataclasses.replace(scripted, events=tuple(events))
            body = copy.deepcopy(scripted.body)
            body["usage"].update(spent)
            return dataclasses.replace(scripted, body=body)

    return ServedUpstream()


class Server:
    """`manage.py lcm_serve` on a fresh data directory, as a child process group."""

    def __init__(self, *, port: int, env: dict, log: Path) -> None:
        self.port = port
        manage = Path(settings.BASE_DIR) / "manage.py"
        self.log = open(log, "ab")  # noqa: SIM115 - closed in stop()
        subprocess.run([sys.executable, str(manage), "migrate", "-v", "0"], env=env, check=True)
        self.env = env
        self.process = subprocess.Popen(
            [sys.executable, str(manage), "lcm_serve", "--no-demo", "--no-migrate",
             "--port", str(port)],
            env=env, stdout=self.log, stderr=self.log, start_new_session=True,
        )  # fmt: skip

    def token(self) -> str:
        manage = Path(settings.BASE_DIR) / "manage.py"
        subprocess.run(
            [sys.executable, str(manage), "lcm_create_user", "bench"],
            env=self.env, check=True, capture_output=True,
        )  # fmt: skip
        out = subprocess.run(
            [sys.executable, str(manage), "lcm_token", "issue", "bench", "--name", "cache"],
            env=self.env, check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip
        return re.search(r"^token: (\S+)", out, re.M).group(1)

    def wait(self) -> None:
        deadline = time.monotonic() + 180
        while True:
            try:
                probe = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                probe.request("GET", "/api/v1/models/")
                probe.getresponse().read()
                probe.close()
                return
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


def _post(port: int, token: str, path: str, body: dict) -> tuple[dict, dict]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    connection.request(
        "POST",
        path,
        json.dumps(body),
        {"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    response = connection.getresponse()
    payload = response.read()
    headers = {k.lower(): v for k, v in response.getheaders()}
    connection.close()
    if response.status >= 300:
        raise RuntimeError(f"POST {path}: HTTP {response.status} {payload[:300]!r}")
    return json.loads(payload), headers


def _session_phase(port: int, token: str, strategy: str, tag: str, turns: int) -> Phase:
    session, _ = _post(
        port,
        token,
        "/api/v1/sessions/",
        {"title": tag, "default_model": "sonnet", "context_strategy": strategy},
    )
    phase = Phase(tag)
    for n in range(1, turns + 1):
        time.sleep(PAUSE_SECONDS)
        question = f"[bench:{tag}] {_turn_text(n)[0]}"
        began = time.perf_counter()
        _post(port, token, f"/api/v1/sessions/{session['id']}/turns/", {"content": question})
        phase.latencies_ms.append((time.perf_counter() - began) * 1000)
    return phase


def _dropin_phase(port: int, token: str, tag: str, turns: int) -> Phase:
    phase = Phase(tag)
    history: list[dict] = []
    for n in range(1, turns + 1):
        time.sleep(PAUSE_SECONDS)
        history.append({"role": "user", "content": f"[bench:{tag}] {_turn_text(n)[0]}"})
        body = {"model": "sonnet", "max_tokens": 1024, "messages": history}
        began = time.perf_counter()
        answer, headers = _post(port, token, "/anthropic/v1/messages", body)
        phase.latencies_ms.append((time.perf_counter() - began) * 1000)
        phase.compacted += headers.get("x-lcm-compacted") == "true"
        history.append({"role": "assistant", "content": answer["content"]})
    return phase


def _figures(records: list[Record], tag: str, turns: int) -> dict:
    mine = [r for r in records if r.tag == tag]
    turn_usage = [r.usage for r in mine if r.kind == "turn"]
    steady = turn_usage[len(turn_usage) // 3 :]
    total = sum(
        u["input_tokens"] + u["cache_creation_input_tokens"] + u["cache_read_input_tokens"]
        for u in steady
    )
    read = sum(u["cache_read_input_tokens"] for u in steady)
    billed = sum(
        billed_input(
            uncached=u["input_tokens"],
            read=u["cache_read_input_tokens"],
            written=u["cache_creation_input_tokens"],
        )
        for u in steady
    )
    summaries = [r.usage for r in mine if r.kind == "summary"]
    summary_tokens = sum(
        u["input_tokens"] + u["cache_creation_input_tokens"] + u["cache_read_input_tokens"]
        for u in summaries
    )
    count = max(1, len(steady))
    return {
        "share": read / total if total else 0.0,
        "mean_input": total // count,
        "billed": round(billed / count),
        "uncached_share": billed / total if total else 0.0,
        "turn_requests": len(turn_usage),
        "summary_calls": len(summaries),
        "summary_tokens_per_100": round(100 * summary_tokens / max(1, turns)),
        "librarian_calls": sum(r.kind == "librarian" for r in mine),
    }


def _share_models(data_dir: Path, env: dict) -> None:
    """One embedding graph for every run (built here once, before the server starts), so
    the workers' first indexing job loads it instead of spending minutes building it while
    the turns run (a user's server builds it once, at its first start)."""
    shared = Path(
        os.environ.get("LCM_BENCH_CACHE_MODELS") or Path(settings.DATA_DIR) / "cache-served-models"
    )
    shared.mkdir(parents=True, exist_ok=True)
    (data_dir / "models").symlink_to(shared, target_is_directory=True)
    manage = Path(settings.BASE_DIR) / "manage.py"
    warm = (
        "from memory.namespaces import backend_for_namespace, search_namespace; "
        "backend_for_namespace(search_namespace()).embed(['warm up'])"
    )
    subprocess.run([sys.executable, str(manage), "migrate", "-v", "0"], env=env, check=True)
    subprocess.run([sys.executable, str(manage), "shell", "-c", warm], env=env, check=True)


def served_window(
    window: int, turns: int, strategies: list[str], port: int, notes: list[str]
) -> list[BenchRow]:
    """The three phases on one served app at `window`."""
    upstream = make_upstream().start()
    data_dir = Path(tempfile.mkdtemp(prefix=f"lcm-cache-{window}-"))
    env = dict(
        os.environ,
        PYTHONUNBUFFERED="1",
        LCM_DATA_DIR=str(data_dir),
        LCM_DATABASE_URL="",
        DATABASE_URL="",
        ANTHROPIC_API_KEY="sk-ant-bench",
        ANTHROPIC_BASE_URL=upstream.base_url,
        LCM_MODEL_SONNET_CONTEXT_LIMIT=str(window),
    )
    for name in ("LCM_CONFIG_FILE", "LCM_REDIS_URL", "LCM_SUMMARY_PROVIDER_MODEL"):
        env.pop(name, None)
    _share_models(data_dir, env)
    server = Server(port=port, env=env, log=data_dir / "server.log")
    rows = []
    try:
        token = server.token()
        server.wait()
        for strategy in strategies:
            tag = f"{strategy}-{window}"
            if strategy == "dropin":
                phase = _dropin_phase(port, token, tag, turns)
            else:
                phase = _session_phase(port, token, strategy, tag, turns)
            time.sleep(2)  # a summary the last turn queued lands in this phase's count
            rows.append(_row(window, strategy, phase, _figures(upstream.records, tag, turns)))
    finally:
        server.stop()
        upstream.stop()
        counts: dict[tuple[str, str], int] = {}
        for record in upstream.records:
            counts[(record.tag, record.kind)] = counts.get((record.tag, record.kind), 0) + 1
        notes.append(
            f"cache served {window:,}: upstream requests by run and kind "
            + ", ".join(f"{tag or '(untagged)'} {kind} {n}" for (tag, kind), n in counts.items())
            + f"; data directory {data_dir}"
        )
    return rows


def _row(window: int, strategy: str, phase: Phase, figures: dict) -> BenchRow:
    target = WINDOW_TARGETS["state" if strategy == "state" else "lcm"]
    share = figures["share"]
    latencies = phase.latencies_ms
    detail = (
        f"{figures['turn_requests']} turn requests, last two thirds: mean input "
        f"{figures['mean_input']:,} tok, billed {figures['billed']:,} "
        f"({100 * figures['uncached_share']:.0f}% of uncached); summaries "
        f"{figures['summary_calls']} calls, {figures['summary_tokens_per_100']:,} tok per 100 "
        f"turns; librarian {figures['librarian_calls']} calls; turn latency p50 "
        f"{percentile(latencies, 0.5):,.0f} ms, p95 {percentile(latencies, 0.95):,.0f} ms"
    )
    if strategy == "dropin":
        detail += f"; {phase.compacted} sent compacted"
    name = {"dropin": "stateless drop-in client"}.get(strategy, strategy)
    return BenchRow(
        f"cache served, window {window:,}, {name}: input cache-readable",
        100 * share,
        "%",
        f">= {100 * target:.0f}",
        f"{detail}; {'met' if share >= target else 'MISSED'}",
    )


@benchmark("cache_served")
def cache_served(ctx: BenchContext) -> list[BenchRow]:
    """`lcm_bench --only cache_served`: the served runs, then the offline-and-synchronous
    rows of benchmarks/cost.py beside them (LCM_BENCH_CACHE_OFFLINE=0 leaves them out)."""
    try:
        import tests.support.fake_messages_api  # noqa: F401
    except ImportError:
        ctx.notes.append("cache served: tests/support not importable, rows skipped")
        return []
    turns = ctx.n(150)
    windows = [
        int(w) for w in os.environ.get("LCM_BENCH_CACHE_WINDOWS", "").split(",") if w.strip()
    ] or list(WINDOWS)
    strategies = os.environ.get("LCM_BENCH_CACHE_STRATEGIES", "lcm,state,dropin").split(",")
    port = int(os.environ.get("LCM_BENCH_CACHE_PORT", "8131"))
    rows = []
    for window in windows:
        rows.extend(served_window(window, turns, strategies, port, ctx.notes))
    if os.environ.get("LCM_BENCH_CACHE_OFFLINE", "1") != "0":
        from benchmarks.cost import _dropin_run, _window_run

        for window in windows:
            for strategy in ("lcm", "state"):
                if strategy in strategies:
                    row = _window_run(window, strategy, turns)
                    row.name = f"offline and synchronous: {row.name}"
                    rows.append(row)
        if "dropin" in strategies:
            row = _dropin_run(windows[0], turns)
            row.name = f"offline and synchronous: {row.name}"
            rows.append(row)
    ctx.notes.append(f"cache served: {turns} turns per run, windows {windows}")
    return rows
