"""A real Claude Code session replayed through `/anthropic` (issue 41, item 5):
`lcm_bench --only claude_code_replay`.

The session (LCM_BENCH_REPLAY_SESSION, default the longest one under
../shared/fixtures/agent-sessions/claude-code/) becomes the successive request bodies
Claude Code sends: the main line of the session file (`parentUuid` order, sub-agent
side chains left out), one API response per assistant message (its records merged by
`message.id`), every request holding all the messages before it. The body's other parts
are those of the real CLI's requests kept as test data
(tests/dropin/data/claude_code_session/: its system prompt with its two cache marks, its
tools, `metadata` with a session id, `thinking`, `context_management`, `output_config`,
`max_tokens` 64000, `stream`), and Claude Code's own breakpoint is placed as it places it:
on the last block of the last message, moved every request (the newest user message goes
as blocks with `cache_control`, then as the plain string it was in the next request).

Per window (LCM_BENCH_REPLAY_WINDOWS, default 200000 and 100000: the unlisted model's
window, `LCM_DROPIN_UNLISTED_CONTEXT_LIMIT`) a real `lcm_serve` (its worker, default
settings, SQLite, a fresh data directory) forwards every request to a fake Anthropic
upstream that answers the recorded assistant message (streamed) and replays the provider's
prompt-cache rule on what it receives (tests/support/fake_prompt_cache.py: breakpoints,
20-block lookback, the 1,024-token minimum); the compaction summaries the worker asks for
are answered by `recording_upstream.compose`. The same bodies are sent straight to a second
fake upstream (the baseline: Claude Code without the product, which never compacts and so
passes the window; where is reported).

Figures: the cache-readable share of input tokens (read / (uncached + written + read)) in
steady state (the requests after the first one sent compacted), overall, and the baseline's
on the requests that fit the window; how often the sent messages were rewritten (a request
whose messages are not the previous request's plus new ones at the end); the server's
latency per request (p50, p95)."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import http.client
import json
import os
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from benchmarks.harness import BenchContext, BenchRow, benchmark, percentile

SESSIONS = Path(settings.BASE_DIR).parent / "shared/fixtures/agent-sessions/claude-code"
DEFAULT_SESSION = "loopkit-v2.1.96.jsonl"
TEMPLATE = (
    Path(settings.BASE_DIR) / "tests/dropin/data/claude_code_session/claude_code_request_07.json"
)
TARGET = 0.85
MARK = {"type": "ephemeral"}


# The session as Claude Code's requests ------------------------------------------------------


def _main_line(records: list[dict]) -> list[dict]:
    """The user and assistant records of the session's main line, in order: from its last
    message back along `parentUuid` (side chains and other record types left out)."""
    by_uuid = {r["uuid"]: r for r in records if r.get("uuid")}
    messages = [
        r
        for r in records
        if r.get("type") in ("user", "assistant") and not r.get("isSidechain") and r.get("message")
    ]
    if not messages:
        return []
    line, seen = [], set()
    record = messages[-1]
    while record is not None and record["uuid"] not in seen:
        seen.add(record["uuid"])
        if record.get("type") in ("user", "assistant") and record.get("message"):
            line.append(record)
        record = by_uuid.get(record.get("parentUuid") or "")
    return line[::-1]


def _clean(content) -> list[dict] | str:
    if isinstance(content, str):
        return content
    blocks = []
    for block in content or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and not block.get("text", "").strip():
            continue
        blocks.append({k: v for k, v in block.items() if k != "cache_control"})
    return blocks


def session_messages(path: Path) -> list[dict]:
    """The session's messages as the API takes them: one assistant message per response
    (its records merged), consecutive user records (parallel tool results) in one message;
    a typed prompt stays the string it was."""
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    merged: list[dict] = []
    last_id = None
    for record in _main_line(records):
        role = record["message"].get("role") or record["type"]
        content = _clean(record["message"].get("content"))
        if not content:
            continue
        message_id = record["message"].get("id") if role == "assistant" else None
        if merged and merged[-1]["role"] == role:
            previous = merged[-1]
            if role == "assistant" and message_id != last_id:
                pass  # a second response in a row (a retried or interrupted one): joined
            previous["content"] = _as_blocks(previous["content"]) + _as_blocks(content)
        else:
            merged.append({"role": role, "content": content})
        last_id = message_id
    while merged and merged[0]["role"] != "user":
        merged.pop(0)
    return merged


def _as_blocks(content) -> list[dict]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def claude_code_requests(messages: list[dict], template: dict, session_id: str):
    """(body, answer blocks) for every assistant message: the request Claude Code sent for
    it, its own breakpoint on the last block of the last message."""
    for index, message in enumerate(messages):
        if message["role"] != "assistant" or index == 0:
            continue
        history = messages[:index]
        last = dict(history[-1])
        blocks = copy.deepcopy(_as_blocks(last["content"]))
        blocks[-1]["cache_control"] = MARK
        last["content"] = blocks
        body = {}
        for name, value in template.items():
            body[name] = history[:-1] + [last] if name == "messages" else value
        metadata = json.loads(body["metadata"]["user_id"])
        metadata["session_id"] = session_id
        body["metadata"] = {"user_id": json.dumps(metadata)}
        yield body, _as_blocks(message["content"])


# The upstreams ------------------------------------------------------------------------------


@dataclass
class Sent:
    kind: str  # main | summary | other
    usage: dict
    message_hashes: list[str] = field(default_factory=list)
    total: int = 0
    summaries: int = 0  # summary blocks sent (0: none)
    summaries_marked: bool = False


def _message_hashes(messages: list) -> list[str]:
    """Per message, a hash of what the provider's rule compares (cache marks left out, a
    string as its one text block)."""
    out = []
    for message in messages:
        blocks = [
            {k: v for k, v in block.items() if k != "cache_control"}
            for block in _as_blocks(message.get("content"))
        ]
        data = json.dumps([message.get("role"), blocks], sort_keys=True).encode()
        out.append(hashlib.sha1(data).hexdigest())
    return out


def _summaries_of(sent: Sent, first: dict) -> None:
    from dropin.services import SUMMARIES_HEADING

    content = first.get("content")
    if isinstance(content, list) and str(content[0].get("text", "")).startswith(SUMMARIES_HEADING):
        sent.summaries = len(content)
        sent.summaries_marked = "cache_control" in content[-1]


def make_upstream():
    from benchmarks.recording_upstream import compose
    from compaction.summarizers.prompts import SYSTEM_PROMPT
    from tests.support.fake_http import SSE
    from tests.support.fake_messages_api import FakeMessagesAPI, anthropic_stream, message

    class ReplayUpstream(FakeMessagesAPI):
        """Answers a main-loop request with the recorded answer it is given, a summary
        request with `compose`, and counts the provider's cache rule on each."""

        def __init__(self) -> None:
            super().__init__(prompt_cache=True)
            self.next_answer: list[dict] = [{"type": "text", "text": "ok"}]
            self.sent: list[Sent] = []
            self.record_lock = threading.Lock()

        def _record_and_pick(self, request):
            refused = self.invalid(request)
            if refused is not None:
                return refused
            body = request.body
            system = body.get("system") or ""
            if isinstance(system, list):
                system = "\n".join(b.get("text", "") for b in system if isinstance(b, dict))
            usage = self.prompt_cache.usage(body)
            total = sum(usage.values())
            if system.startswith(SYSTEM_PROMPT[:60]):
                last = (body.get("messages") or [{}])[-1].get("content") or ""
                text = last if isinstance(last, str) else json.dumps(last)
                sent, scripted = Sent("summary", usage), message(compose(text) or "Summary.")
            elif body.get("tools") and body.get("stream"):
                hashes = _message_hashes(body.get("messages") or [])
                sent = Sent("main", usage, hashes, total)
                _summaries_of(sent, body["messages"][0])
                scripted = anthropic_stream(self.next_answer)
            else:
                sent, scripted = Sent("other", usage), message("ok")
            with self.record_lock:
                self.sent.append(sent)
            if scripted.events is not None:
                events = []
                for event in scripted.events:
                    data = event.data
                    if event.event == "message_start":
                        data = copy.deepcopy(data)
                        data["message"]["usage"].update(usage)
                    events.append(SSE(event.event, data))
                return dataclasses.replace(scripted, events=tuple(events))
            answer = copy.deepcopy(scripted.body)
            answer["usage"].update(usage)
            return dataclasses.replace(scripted, body=answer)

    return ReplayUpstream()


def _post(port: int, path: str, raw: bytes, headers: list) -> tuple[int, dict, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    connection.putrequest("POST", path, skip_accept_encoding=True)
    for name, value in headers:
        connection.putheader(name, value)
    connection.putheader("Content-Length", str(len(raw)))
    connection.endheaders(raw)
    response = connection.getresponse()
    payload = response.read()
    connection.close()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, payload


# The runs -----------------------------------------------------------------------------------


@dataclass
class Run:
    latencies_ms: list[float] = field(default_factory=list)
    compacted: list[bool] = field(default_factory=list)
    failed: int = 0


def _share(usages: list[dict]) -> tuple[float, int]:
    total = sum(sum(u.values()) for u in usages)
    read = sum(u["cache_read_input_tokens"] for u in usages)
    return (read / total if total else 0.0), total


def _rewrites(main: list[Sent]) -> int:
    """Requests whose messages are not the previous request's with new ones at the end."""
    return sum(
        1
        for before, after in zip(main, main[1:], strict=False)
        if after.message_hashes[: len(before.message_hashes)] != before.message_hashes
    )


def _replay(port: int, bodies: list, upstream, headers: list, path: str, pause: float) -> Run:
    run = Run()
    for body, answer in bodies:
        upstream.next_answer = answer
        raw = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
        if pause:
            time.sleep(pause)
        began = time.perf_counter()
        status, answered, _ = _post(port, path, raw, headers)
        run.latencies_ms.append((time.perf_counter() - began) * 1000)
        run.compacted.append(answered.get("x-lcm-compacted") == "true")
        run.failed += status >= 300
    return run


def _headers(template: dict, session_id: str, token: str | None) -> list:
    headers = []
    for name, value in template["headers"]:
        if name.lower() in ("content-length", "host"):
            continue
        headers.append((name, session_id if name == "X-Claude-Code-Session-Id" else value))
    headers.append(("x-api-key", "sk-ant-the-clients-own"))
    if token:
        headers.append(("X-LCM-Token", token))
    return headers


def replay_window(window: int, bodies: list, template: dict, port: int, notes: list) -> list:
    from benchmarks.cache_served import Server

    upstream = make_upstream().start()
    baseline = make_upstream().start()
    data_dir = Path(tempfile.mkdtemp(prefix=f"lcm-replay-{window}-"))
    env = dict(
        os.environ,
        PYTHONUNBUFFERED="1",
        LCM_DATA_DIR=str(data_dir),
        LCM_DATABASE_URL="",
        DATABASE_URL="",
        ANTHROPIC_API_KEY="sk-ant-bench",
        ANTHROPIC_BASE_URL=upstream.base_url,
        LCM_DROPIN_UNLISTED_CONTEXT_LIMIT=str(window),
    )
    for name in ("LCM_CONFIG_FILE", "LCM_REDIS_URL", "LCM_SUMMARY_PROVIDER_MODEL"):
        env.pop(name, None)
    server = Server(port=port, env=env, log=data_dir / "server.log")
    pause = float(os.environ.get("LCM_BENCH_REPLAY_PAUSE", "0.3"))
    session_id = str(uuid.uuid4())
    path = "/anthropic/v1/messages?beta=true"
    try:
        token = server.token()
        server.wait()
        run = _replay(port, bodies, upstream, _headers(template, session_id, token), path, pause)
        host, upstream_port = baseline.base_url.removeprefix("http://").split(":")
        straight = _replay(
            int(upstream_port), bodies, baseline, _headers(template, session_id, None),
            "/v1/messages?beta=true", 0.0,
        )  # fmt: skip
    finally:
        server.stop()
        upstream.stop()
        baseline.stop()
    return _rows(window, run, straight, upstream, baseline, notes, data_dir)


def _rows(window, run, straight, upstream, baseline, notes, data_dir) -> list[BenchRow]:
    main = [s for s in upstream.sent if s.kind == "main"]
    base = [s for s in baseline.sent if s.kind == "main"]
    first = next((i for i, c in enumerate(run.compacted) if c), None)
    steady = main[first + 1 :] if first is not None else []
    share, steady_tokens = _share([s.usage for s in steady])
    overall, _ = _share([s.usage for s in main])
    over = next((i for i, s in enumerate(base) if s.total > window), None)
    fitting = base[:over] if over is not None else base
    base_share, _ = _share([s.usage for s in fitting])
    base_all, _ = _share([s.usage for s in base])
    summaries = sum(s.kind == "summary" for s in upstream.sent)
    rewrites = _rewrites(main)
    detail = (
        f"{len(main)} requests ({run.failed} failed), {sum(run.compacted)} sent compacted, "
        f"first at request {first}; steady state {len(steady)} requests, "
        f"{steady_tokens // max(1, len(steady)):,} input tok each; overall {overall:.3f}; "
        f"messages rewritten on {rewrites} requests; {summaries} summary calls, "
        f"{sum(s.summaries > 0 for s in main)} requests sent with summaries "
        f"({sum(s.summaries_marked for s in main)} with the summaries' mark); "
        f"latency p50 {percentile(run.latencies_ms, 0.5):,.0f} ms, "
        f"p95 {percentile(run.latencies_ms, 0.95):,.0f} ms; "
        f"baseline (same bodies straight to the upstream): {base_share:.3f} on the "
        f"{len(fitting)} requests within the window, {base_all:.3f} on all; "
        + (
            f"past the window from request {over} ({base[over].total:,} tok)"
            if over is not None
            else "never past the window"
        )
    )
    notes.append(f"claude code replay {window:,}: data directory {data_dir}")
    if first is None:  # never past the budget: every request passed through as it was
        share = overall
        detail += "; never past the budget: the drop-in passed every request through"
    met = "met" if share >= TARGET else "MISSED"
    return [
        BenchRow(
            f"Claude Code session replayed through /anthropic, window {window:,}: "
            "input cache-readable in steady state",
            round(100 * share, 1),
            "%",
            f">= {100 * TARGET:.0f}",
            f"{detail}; {met}",
        )
    ]


@benchmark("claude_code_replay")
def claude_code_replay(ctx: BenchContext) -> list[BenchRow]:
    session = Path(os.environ.get("LCM_BENCH_REPLAY_SESSION") or SESSIONS / DEFAULT_SESSION)
    if not session.exists():
        ctx.notes.append(f"claude code replay: no session file at {session}, skipped")
        return []
    template = json.loads(TEMPLATE.read_text())
    windows = [
        int(w)
        for w in os.environ.get("LCM_BENCH_REPLAY_WINDOWS", "200000,100000").split(",")
        if w.strip()
    ]
    port = int(os.environ.get("LCM_BENCH_REPLAY_PORT", "8350"))
    messages = session_messages(session)
    session_id = str(uuid.uuid4())
    bodies = list(claude_code_requests(messages, template["body"], session_id))
    bodies = bodies[: ctx.n(len(bodies))]
    ctx.notes.append(
        f"claude code replay: {session.name}, {len(messages)} messages, {len(bodies)} "
        f"requests; system prompt and tools of {TEMPLATE.name}"
    )
    rows = []
    for window in windows:
        rows.extend(replay_window(window, bodies, template, port, ctx.notes))
    return rows
