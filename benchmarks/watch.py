"""Live capture benchmarks (`lcm_bench --only capture`, docs/benchmarks.md).

* Backfill: 1,000 generated sessions in the agents' real shapes (700 Claude Code with
  attachments and tool calls, 200 Codex rollouts, 100 Gemini chats) brought in by one
  watcher pass (what `lcm_watch --once` does), in messages per second.
* Idle CPU of a `manage.py lcm_watch` process following that store of 1,000 sessions, with
  file events and with `--poll 1`, in percent of one core over 10 s.
* Live latency: a line appended to a Claude Code file watched by a running `lcm_watch`
  (file events) until full-text grep finds it (p50/p95), and until semantic grep does (a
  `qcluster` worker indexes it, as beside `lcm_serve`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from django.conf import settings

from benchmarks.conversations import bench_user
from benchmarks.harness import BenchContext, BenchRow, Timer, benchmark, p50, percentile
from benchmarks.synthetic import claude_code_session
from conversations.models import Conversation
from importers.watch.local import LocalSink
from importers.watch.loop import Watcher
from importers.watch.stores import make_stores
from retrieval.grep import GrepRequest, grep_for_user

_NOT_FOLLOWED = ["--no-codex", "--no-opencode", "--no-gemini"]


def _codex_rollout(session: str, rounds: int) -> list[dict]:
    def line(kind, payload, second):
        return {"timestamp": f"2026-05-02T09:{second // 60 % 60:02d}:{second % 60:02d}Z",
                "type": kind, "payload": payload}  # fmt: skip

    lines = [
        line("session_meta", {"id": session, "cwd": "/home/dev/app", "cli_version": "0.58.0"}, 0)
    ]
    lines.append(line("turn_context", {"cwd": "/home/dev/app", "model": "gpt-5-codex"}, 0))
    for r in range(rounds):
        text = f"Round {r}: run the tests of module {r} in {session[:8]}."
        lines += [
            line("response_item", {"type": "message", "role": "user",
                                   "content": [{"type": "input_text", "text": text}]}, 4 * r),
            line("response_item", {"type": "function_call", "name": "shell", "call_id": f"c{r}",
                                   "arguments": json.dumps({"command": ["pytest", "-q"]})}, 4 * r + 1),
            line("response_item", {"type": "function_call_output", "call_id": f"c{r}",
                                   "output": f"{r} passed"}, 4 * r + 2),
            line("response_item", {"type": "message", "role": "assistant",
                                   "content": [{"type": "output_text", "text": f"All {r} pass."}]}, 4 * r + 3),
            line("event_msg", {"type": "token_count", "info": {"total_token_usage": {"input_tokens": 9}}}, 4 * r + 3),
        ]  # fmt: skip
    return lines


def _gemini_chat(session: str, rounds: int) -> dict:
    messages = []
    for r in range(rounds):
        messages.append(
            {
                "id": f"{session}-u{r}",
                "timestamp": "2026-05-02T09:00:00Z",
                "type": "user",
                "content": f"Explain step {r} of the build.",
            }
        )
        messages.append({"id": f"{session}-g{r}", "timestamp": "2026-05-02T09:00:01Z",
                         "type": "gemini", "content": f"Step {r} compiles the sources.",
                         "model": "gemini-2.5-pro", "tokens": {"input": 10, "output": 5},
                         "toolCalls": [{"id": f"t{r}", "name": "read_file", "args": {"path": "a"},
                                        "status": "success", "result": [{"functionResponse": {
                                            "id": f"t{r}", "name": "read_file",
                                            "response": {"output": "text"}}}]}]})  # fmt: skip
    return {"sessionId": session, "projectHash": "ab" * 32, "startTime": "2026-05-02T09:00:00Z",
            "lastUpdated": "2026-05-02T09:10:00Z", "messages": messages}  # fmt: skip


def write_sessions(root: Path, count: int) -> dict[str, list[Path]]:
    """`count` sessions laid out like the agents' stores (7 : 2 : 1)."""
    roots = {
        "claude-code": [root / "claude"],
        "codex": [root / "codex"],
        "gemini": [root / "gemini"],
    }
    for n in range(count):
        session = str(uuid.uuid4())
        if n % 10 < 7:
            path = root / "claude" / f"-home-dev-p{n % 20}" / f"{session}.jsonl"
            records = claude_code_session(rounds=5, session_id=session, compactions=0)
        elif n % 10 < 9:
            path = (
                root
                / "codex"
                / "2026"
                / "05"
                / "02"
                / f"rollout-2026-05-02T09-00-00-{session}.jsonl"
            )
            records = _codex_rollout(session, 5)
        else:
            path = (
                root
                / "gemini"
                / f"p{n % 20}"
                / "chats"
                / f"session-2026-05-02T09-00-{session[:8]}.json"
            )
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(_gemini_chat(session, 5)))
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return roots


def _start_watcher(user, folders: list[str], *extra: str) -> subprocess.Popen:
    command = [sys.executable, str(Path(settings.BASE_DIR) / "manage.py"), "lcm_watch",
               "--user", user.username, "--quiet", *folders, *extra]  # fmt: skip
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, start_new_session=True)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _idle_cpu(user, roots: dict, *extra: str) -> float:
    folders = [arg for agent, paths in roots.items() for p in paths
               for arg in (f"--{agent}-dir", str(p))] + ["--no-opencode"]  # fmt: skip
    process = _start_watcher(user, folders, *extra)
    try:
        time.sleep(8)  # its first pass: everything is already imported
        before, started = _cpu_seconds(process.pid), time.monotonic()
        time.sleep(10)
        return 100 * (_cpu_seconds(process.pid) - before) / (time.monotonic() - started)
    finally:
        process.terminate()
        process.wait(15)


def _found(user, conversation_id: int, query: str, token: str, mode: str) -> bool:
    request = GrepRequest(query=query, mode=mode, conversation_id=conversation_id, limit=20)
    return any(
        token in json.dumps(hit, default=str) for hit in grep_for_user(user=user, request=request)
    )


def _wait(condition, timeout: float) -> float | None:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if condition():
            return time.monotonic() - started
        time.sleep(0.05)
    return None


def _one_line(user, conversation_id: int, path: Path, template: dict, parent: str):
    """Append one user record; seconds until full-text grep, then semantic grep, find it."""
    token = f"zq{uuid.uuid4().hex[:10]}"
    sentence = f"The flaky deploy of service {token} failed because the disk filled up"
    record = dict(template, uuid=str(uuid.uuid4()), parentUuid=parent,
                  message={"role": "user", "content": sentence})  # fmt: skip
    with path.open("a") as handle:
        handle.write(json.dumps(record) + "\n")
    started = time.monotonic()
    seconds = _wait(lambda: _found(user, conversation_id, token, token, "full_text"), 20)
    if seconds is None:
        return record["uuid"], None, None
    waited = _wait(lambda: _found(user, conversation_id, sentence, token, "semantic"), 30)
    return record["uuid"], seconds, None if waited is None else time.monotonic() - started


def _live_latency(user, root: Path, samples: int) -> tuple[list, list, int]:
    """Seconds from an appended line to full-text and to semantic findability."""
    session = str(uuid.uuid4())
    path = root / "-home-dev-live" / f"{session}.jsonl"
    path.parent.mkdir(parents=True)
    records = claude_code_session(rounds=50, session_id=session, compactions=0)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    manage = [sys.executable, str(Path(settings.BASE_DIR) / "manage.py")]
    worker = subprocess.Popen(manage + ["qcluster"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    watcher = _start_watcher(user, ["--claude-code-dir", str(root), *_NOT_FOLLOWED])
    full, semantic, missed = [], [], 0
    try:
        found = _wait(
            lambda: Conversation.objects.filter(owner=user, session_id=session).exists(), 60
        )
        conversation = Conversation.objects.get(owner=user, session_id=session)
        assert found is not None, "the watcher never imported the session"
        main = [r for r in records if r.get("type") == "user" and not r.get("isSidechain")]
        parent = [r for r in records if r.get("uuid") and not r.get("isSidechain")][-1]["uuid"]
        for _ in range(samples):
            parent, seconds, semantic_seconds = _one_line(
                user, conversation.pk, path, main[0], parent
            )
            if seconds is None:
                missed += 1
                continue
            full.append(seconds)
            if semantic_seconds is not None:
                semantic.append(semantic_seconds)
            time.sleep(0.3)
    finally:
        for process in (watcher, worker):
            process.terminate()
            process.wait(30)
    return full, semantic, missed


@benchmark("capture")
def capture(ctx: BenchContext) -> list[BenchRow]:
    user = bench_user()
    with tempfile.TemporaryDirectory(prefix="lcm-bench-capture-") as folder:
        # First, while the worker's queue is empty: the backfill queues an indexing job
        # per session, which a worker started afterwards would work through first.
        full, semantic, missed = _live_latency(user, Path(folder) / "live", ctx.n(20))
        rows = _latency_rows(full, semantic, missed)
        roots = write_sessions(Path(folder) / "stores", ctx.n(1000))
        watcher = Watcher(make_stores(roots), LocalSink(user), log=lambda text: None)
        with Timer() as t:
            result = watcher.run_pass()
        rows.append(BenchRow(
            "capture: backfill (lcm_watch --once)", result.messages / t.seconds, "messages/s", "",
            f"{result.units:,} sessions (700 Claude Code, 200 Codex, 100 Gemini per 1,000), "
            f"{result.messages:,} messages in {t.seconds:.1f} s",
        ))  # fmt: skip
        rows.append(_baseline(make_stores(roots), result.messages))
        for label, extra in (("file events", ()), ("--poll 1", ("--poll", "1"))):
            cpu = _idle_cpu(user, roots, *extra)
            rows.append(BenchRow(f"capture: idle CPU, {label}", cpu, "% of a core", "",
                                 f"lcm_watch following {result.units:,} session files, 10 s"))  # fmt: skip
    return rows


def _baseline(stores, expected: int) -> BenchRow:
    """The same sessions through `import_file` one by one (what `lcm_import` does), for
    another user: the importer's own cost, without the watcher's bookkeeping."""
    from django.contrib.auth import get_user_model

    from importers.services import import_file
    from importers.watch.stores import discover

    other, _ = get_user_model().objects.get_or_create(username="lcm-bench-baseline")
    units = {(w.agent, w.unit) for store in stores for w in discover(store)}
    with Timer() as t:
        added = sum(
            import_file(format=agent, path=unit, owner=other).totals()["messages"]
            for agent, unit in sorted(units)
        )
    assert added == expected, (added, expected)
    return BenchRow(
        "capture: backfill baseline (import_file per session)", added / t.seconds, "messages/s",
        "", f"the same {len(units):,} sessions for another user, {added:,} messages in {t.seconds:.1f} s",
    )  # fmt: skip


def _latency_rows(full: list, semantic: list, missed: int) -> list[BenchRow]:
    detail = f"{len(full)} appended lines, {missed} not found within 20 s"
    sem = f"{len(semantic)} of {len(full)} found by semantic grep within 30 s (qcluster indexing)"
    nan = float("nan")
    return [
        BenchRow("capture: live line -> full-text grep, p50", p50(full) if full else nan, "s", "< 2 s", detail),
        BenchRow("capture: live line -> full-text grep, p95", percentile(full, 0.95), "s", "< 5 s", detail),
        BenchRow("capture: live line -> semantic grep, p50", p50(semantic) if semantic else nan, "s", "", sem),
        BenchRow("capture: live line -> semantic grep, p95", percentile(semantic, 0.95), "s", "", sem),
    ]  # fmt: skip
