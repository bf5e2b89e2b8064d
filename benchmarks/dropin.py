"""Drop-in benchmark: the time the server adds before the upstream's first byte, and 50
concurrent streams through the proxy, with the official `openai` SDK as the client.

The server is the project's WSGI application on a threaded HTTP server in this process; the
upstream is a minimal local Chat Completions server (`_Upstream`) that stamps when each
request arrives and answers with a short stream. Model: `bench-chat` (openai_chat, context
limit 8,000 tokens), so a 1,000-message history is over the budget and the server sends its
assembled context.

Figures:
- `overhead`: from the client's send to the upstream's arrival stamp, through the proxy,
  minus the baseline (the same SDK call straight to the upstream, same run), p50 / p95 over
  `_RUNS` stateless requests resending a history of 1,000 (growing to 1,000 + 2 x runs)
  messages;
- `concurrent`: 50 streams at once (each its own conversation), errors and wall time.
"""

from __future__ import annotations

import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import openai
from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections

from benchmarks.conversations import bench_user
from benchmarks.harness import BenchContext, BenchRow, Timer, benchmark, p50, percentile

_RUNS = 60
_HISTORY = 1000
_STREAMS = 50
_ENV = {
    "LCM_MODEL_BENCH_CHAT_PROVIDER": "openai_chat",
    "LCM_MODEL_BENCH_CHAT_MODEL_ID": "bench-model",
    "LCM_MODEL_BENCH_CHAT_CONTEXT_LIMIT": "8000",
    "LCM_MODEL_BENCH_CHAT_MAX_OUTPUT_TOKENS": "512",
    "LCM_MODEL_BENCH_CHAT_API_KEY_ENV": "LCM_BENCH_CHAT_KEY",
    "LCM_MODEL_BENCH_CHAT_BASE_URL_ENV": "LCM_BENCH_CHAT_BASE_URL",
    "LCM_BENCH_CHAT_KEY": "bench-upstream-key",
}


class _Upstream:
    """A Chat Completions server: stamps arrivals (perf_counter), answers a 3-chunk stream
    (or JSON), `[DONE]`."""

    def __init__(self) -> None:
        self.arrivals: list[float] = []
        self.lock = threading.Lock()
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                arrived = time.perf_counter()
                with upstream.lock:
                    upstream.arrivals.append(arrived)
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                chunk = {
                    "id": "chatcmpl-bench",
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": "bench-model",
                }
                if body.get("stream"):
                    events = [
                        {
                            **chunk,
                            "choices": [
                                {"index": 0, "delta": {"content": piece}, "finish_reason": None}
                            ],
                        }
                        for piece in ("fine, ", "thank ", "you")
                    ]
                    events.append(
                        {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
                    )
                    payload = (
                        "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
                    )
                    kind = "text/event-stream"
                else:
                    payload = json.dumps(
                        {
                            **chunk,
                            "object": "chat.completion",
                            "choices": [
                                {
                                    "index": 0,
                                    "message": {"role": "assistant", "content": "fine, thank you"},
                                    "finish_reason": "stop",
                                }
                            ],
                            "usage": {
                                "prompt_tokens": 10,
                                "completion_tokens": 3,
                                "total_tokens": 13,
                            },
                        }
                    )
                    kind = "application/json"
                data = payload.encode()
                self.send_response(200)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def last_arrival(self) -> float:
        with self.lock:
            return self.arrivals[-1]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args) -> None:
        pass


def _serve_project(entries: list[float]) -> tuple[ThreadedWSGIServer, str]:
    """The project on a threaded WSGI server; `entries` gets the time each request reaches
    the application (its headers read, its body not yet)."""
    application = get_wsgi_application()

    def stamped(environ, start_response):
        entries.append(time.perf_counter())
        return application(environ, start_response)

    server = ThreadedWSGIServer(("127.0.0.1", 0), _Quiet)
    server.set_app(stamped)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def _token(user) -> str:
    from tokens.services import token_rotate

    return token_rotate(user=user, name="bench").key


def _history(count: int) -> list[dict]:
    words = [
        "the",
        "harbour",
        "pilot",
        "checked",
        "the",
        "tide",
        "tables",
        "before",
        "the",
        "ferry",
        "left",
        "at",
        "dawn",
    ]
    messages = []
    for i in range(count):
        text = " ".join(words[(i + k) % len(words)] for k in range(24)) + f" (message {i})"
        messages.append({"role": "user" if i % 2 == 0 else "assistant", "content": text})
    return messages


def _timed(client: openai.OpenAI, upstream: _Upstream, messages: list[dict], **extra) -> float:
    sent = time.perf_counter()
    client.chat.completions.create(model="bench_chat", messages=messages, **extra)
    return (upstream.last_arrival() - sent) * 1000


@benchmark("dropin")
def run(ctx: BenchContext) -> list[BenchRow]:
    saved = {name: os.environ.get(name) for name in [*_ENV, "LCM_BENCH_CHAT_BASE_URL"]}
    upstream = _Upstream()
    os.environ.update(_ENV)
    os.environ["LCM_BENCH_CHAT_BASE_URL"] = upstream.url
    entries: list[float] = []
    server, url = _serve_project(entries)
    try:
        user = bench_user()
        key = _token(user)
        proxy = openai.OpenAI(api_key=key, base_url=f"{url}/openai/v1", max_retries=0, timeout=60)
        direct = openai.OpenAI(api_key="x", base_url=upstream.url, max_retries=0, timeout=60)
        runs = ctx.n(_RUNS)
        conversation = f"bench-{time.time_ns()}"
        headers = {"X-LCM-Conversation": conversation}
        history = _history(_HISTORY - 1) + [{"role": "user", "content": "first question"}]
        with Timer() as first:
            proxy.chat.completions.create(
                model="bench_chat", messages=history, extra_headers=headers
            )
        history.append({"role": "assistant", "content": "fine, thank you"})
        baseline, added, server_ms = [], [], []
        for i in range(runs):
            history.append({"role": "user", "content": f"question {i}: and then?"})
            baseline.append(_timed(direct, upstream, history))
            raw = proxy.chat.completions.with_raw_response.create(
                model="bench_chat", messages=history, extra_headers=headers
            )
            added.append((upstream.last_arrival() - entries[-1]) * 1000)
            server_ms.append(float(raw.headers["x-lcm-server-ms"]))
            history.append({"role": "assistant", "content": "fine, thank you"})

        errors: list[str] = []

        def stream(i: int) -> int:
            client = openai.OpenAI(
                api_key=key, base_url=f"{url}/openai/v1", max_retries=0, timeout=120
            )
            try:
                chunks = list(
                    client.chat.completions.create(
                        model="bench_chat",
                        messages=[{"role": "user", "content": f"stream {i} of {conversation}"}],
                        stream=True,
                        extra_headers={"X-LCM-Conversation": f"{conversation}-s{i}"},
                    )
                )
                text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
                if text != "fine, thank you":
                    errors.append(f"stream {i}: {text!r}")
            except Exception as error:  # noqa: BLE001 - counted, reported
                errors.append(f"stream {i}: {type(error).__name__}: {error}")
            finally:
                close_old_connections()
            return i

        with Timer() as wall, ThreadPoolExecutor(_STREAMS) as pool:
            list(pool.map(stream, range(_STREAMS)))
    finally:
        server.shutdown()
        server.server_close()
        upstream.stop()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    if errors:
        ctx.notes.append("dropin: " + "; ".join(errors[:5]))
    return [
        BenchRow(
            f"drop-in: first request storing {_HISTORY} messages",
            first.seconds * 1000,
            "ms",
            detail="one stateless request carrying the whole history",
        ),
        BenchRow(
            f"drop-in: added before upstream first byte p50 ({_HISTORY}+ messages)",
            p50(added),
            "ms",
            target="< 15 ms",
            detail=f"p95 {percentile(added, 0.95):.1f} ms; from the request reaching the server to the upstream receiving its call; {runs} runs",
        ),
        BenchRow(
            f"baseline: the openai SDK sending {_HISTORY}+ messages straight to the upstream p50",
            p50(baseline),
            "ms",
            detail="client-side cost every caller pays with or without the proxy",
        ),
        BenchRow(
            "drop-in: server's own preparation p50 (X-LCM-Server-Ms)",
            p50(server_ms),
            "ms",
            detail=f"p95 {percentile(server_ms, 0.95):.1f} ms: auth, parse, find, append, assemble",
        ),
        BenchRow(
            f"drop-in: {_STREAMS} concurrent streams",
            float(len(errors)),
            "errors",
            target="0",
            detail=f"wall {wall.seconds:.2f} s",
        ),
    ]
