#!/usr/bin/env python3
"""Server time added before the first byte, at 1,000 messages, through the served app.

    scripts/first_byte_bench.py [--database-url URL] [--port 8201] [--messages 1000]
                                [--requests 30] [--pause 0.3] [--profile FILE]

What it runs, as users run it: `manage.py lcm_serve` (uvicorn, its qcluster worker, default
settings; SQLite under a fresh LCM_DATA_DIR unless `--database-url` names a PostgreSQL
database, which is emptied first) in front of a local Anthropic Messages upstream that
answers at once (a streamed thinking + tool_use answer). The client sends what Claude Code
sends on `/anthropic/v1/messages` (the recorded request's system prompt, tools, metadata
with the session id, `X-LCM-Token` beside the user's own `x-api-key`): a history of
MESSAGES Claude-Code-shaped messages (a prompt, then assistant turns of thinking + text +
tool_use, each answered by a tool_result), growing by 2 a request (the answer and its tool
result), REQUESTS times, PAUSE seconds apart (the agent running its tool; the server
stores the answer meanwhile, as it does between an agent's requests). The upstream's
window is 1,000,000 tokens: pass-through, nothing compacted.

Each request goes through the app, then straight to the upstream (same run, same bytes):
- server: the app's own time before it calls the upstream (`X-LCM-Server-Ms`);
- added before the upstream: (upstream arrival - client send) through, minus direct;
- added first byte: (client's first byte) through, minus direct.
Prints p50 / p95 of each and the load (`os.getloadavg`) before and after, as JSON.

`--profile FILE`: the server runs under py-spy (`pip install py-spy`; one process, no
worker), which writes the sampled stacks (collapsed, one a line) to FILE when it stops.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "tests" / "dropin" / "data" / "claude_code_oneshot.json"


def sse(name: str, payload: dict) -> bytes:
    return f"event: {name}\ndata: {json.dumps(payload)}\n\n".encode()


class Upstream(ThreadingHTTPServer):
    """Anthropic Messages answering at once: thinking, then a Bash tool call, streamed."""

    daemon_threads = True

    def __init__(self, port: int):
        super().__init__(("127.0.0.1", port), _Handler)
        self.arrivals: list[float] = []


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.arrivals.append(time.perf_counter())  # type: ignore[attr-defined]
        body = json.loads(raw)
        count = len(body.get("messages") or [])
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        message = {"id": f"msg_b{time.time_ns()}", "type": "message", "role": "assistant",
                   "model": body.get("model"), "content": [], "stop_reason": None,
                   "stop_sequence": None, "usage": {"input_tokens": len(raw) // 4, "output_tokens": 1}}  # fmt: skip
        events = [
            ("message_start", {"type": "message_start", "message": message}),
            ("content_block_start", {"type": "content_block_start", "index": 0,
             "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0,
             "delta": {"type": "thinking_delta", "thinking": f"Step {count}."}}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0,
             "delta": {"type": "signature_delta", "signature": f"sig{count}"}}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("content_block_start", {"type": "content_block_start", "index": 1,
             "content_block": {"type": "tool_use", "id": f"toolu_{count}", "name": "Bash", "input": {}}}),
            ("content_block_delta", {"type": "content_block_delta", "index": 1,
             "delta": {"type": "input_json_delta", "partial_json": json.dumps({"command": f"ls d{count}"})}}),
            ("content_block_stop", {"type": "content_block_stop", "index": 1}),
            ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use",
             "stop_sequence": None}, "usage": {"output_tokens": 20}}),
            ("message_stop", {"type": "message_stop"}),
        ]  # fmt: skip
        for name, payload in events:
            self.wfile.write(sse(name, payload))
        self.wfile.flush()


def assistant_turn(n: int) -> dict:
    return {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": f"Looking at step {n}. " * 8, "signature": f"s{n}" * 20},
            {"type": "text", "text": f"I will list directory d{n} to see what is there."},
            {"type": "tool_use", "id": f"toolu_h{n}", "name": "Bash",
             "input": {"command": f"ls -la /work/project/d{n}", "description": "List files"}},
        ],
    }  # fmt: skip


def answered(count: int) -> dict:
    """The upstream's answer to a request of `count` messages, as the client sends it back."""
    return {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": f"Step {count}.", "signature": f"sig{count}"},
            {"type": "tool_use", "id": f"toolu_{count}", "name": "Bash",
             "input": {"command": f"ls d{count}"}},
        ],
    }  # fmt: skip


def tool_result(n: int, prefix: str = "toolu_h") -> dict:
    listing = "".join(
        f"-rw-r--r-- 1 u u {n * 7 + i:6d} Dec  7 02:00 file_{n}_{i}.py\n" for i in range(12)
    )
    return {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": f"{prefix}{n}", "content": listing}]}  # fmt: skip


def history(size: int) -> list[dict]:
    messages = [{"role": "user", "content": [{"type": "text", "text": "Tidy up this project."}]}]
    n = 0
    while len(messages) < size - 1:
        messages += [assistant_turn(n), tool_result(n)]
        n += 1
    return messages


def manage(env: dict, *args: str) -> str:
    return subprocess.check_output(
        [sys.executable, str(ROOT / "manage.py"), *args], env=env, cwd=ROOT, text=True
    )


def wait_for(url: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.3)
    raise SystemExit(f"{url} did not come up")


def reset_postgres(url: str) -> None:
    import psycopg

    name = url.rsplit("/", 1)[1]
    with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{name}"')


def timed(port: int, path: str, raw: bytes, headers: dict, arrivals: list) -> tuple:
    """(upstream arrival - send, first byte - send, X-LCM-Server-Ms or None), in ms."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    before = len(arrivals)
    sent = time.perf_counter()
    connection.request("POST", path, body=raw, headers=headers)
    response = connection.getresponse()
    response.read(1)
    first = time.perf_counter()
    response.read()
    server = response.getheader("X-LCM-Server-Ms")
    status = response.status
    connection.close()
    if status != 200:
        raise SystemExit(f"HTTP {status} from port {port}")
    return (
        (arrivals[before] - sent) * 1000,
        (first - sent) * 1000,
        float(server) if server else None,
    )


def cpu_ms(pid: int | None) -> float:
    """The process's CPU time so far (user + system), in ms (0 when it cannot be read)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError, TypeError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def measure(token: str, lcm_port: int, upstream: Upstream, options, pid: int | None) -> dict:
    size, requests = options.messages, options.requests
    template = json.loads(TEMPLATE.read_text())
    body = template["body"]
    body["metadata"] = {"user_id": json.dumps({"session_id": f"bench-{time.time_ns()}"})}
    body["stream"] = True
    headers = {name: value for name, value in template["headers"]}
    headers.update({"x-api-key": "sk-ant-own", "X-LCM-Token": token})
    messages = history(size)
    upstream_port = upstream.server_address[1]
    rows, first_ms, cpu_from = [], None, 0.0
    for run in range(requests + 1):
        raw = json.dumps({**body, "messages": messages}, separators=(",", ":")).encode()
        through = timed(
            lcm_port, "/anthropic/v1/messages?beta=true", raw, headers, upstream.arrivals
        )
        direct = timed(upstream_port, "/v1/messages?beta=true", raw, headers, upstream.arrivals)
        if run == 0:  # the first request stores the whole history: reported apart
            first_ms = through[1]
            time.sleep(options.pause)
            cpu_from = cpu_ms(pid)
        else:
            rows.append((through[2], through[0] - direct[0], through[1] - direct[1], direct[1]))
        messages = messages + [answered(len(messages)), tool_result(len(messages), "toolu_")]
        time.sleep(options.pause)  # the agent runs its tool; the server stores the answer

    def p(values, q):
        values = sorted(values)
        return round(values[min(len(values) - 1, int(len(values) * q))], 1)

    return {
        "messages_at_first_timed_request": size + 2,
        "requests": len(rows),
        "body_kb": len(raw) // 1024,
        "first_request_storing_all_ms": round(first_ms, 1),
        "server_ms_p50": p([r[0] for r in rows], 0.5),
        "server_ms_p95": p([r[0] for r in rows], 0.95),
        "added_before_upstream_p50": p([r[1] for r in rows], 0.5),
        "added_before_upstream_p95": p([r[1] for r in rows], 0.95),
        "added_first_byte_p50": p([r[2] for r in rows], 0.5),
        "added_first_byte_p95": p([r[2] for r in rows], 0.95),
        "direct_first_byte_p50": round(statistics.median(r[3] for r in rows), 1),
        # The server process's CPU time per request, the answer's storing included.
        "server_cpu_ms_per_request": round((cpu_ms(pid) - cpu_from) / len(rows), 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--database-url", default=None, help="PostgreSQL (emptied first)")
    parser.add_argument("--port", type=int, default=8201, help="the app's port")
    parser.add_argument("--upstream-port", type=int, default=8202)
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument(
        "--pause", type=float, default=0.3, help="seconds between requests (the tool's run)"
    )
    parser.add_argument("--profile", default=None, help="sample the server into FILE (py-spy)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="lcm-first-byte-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "LCM_"))}
    env.update(
        {
            "LCM_DATA_DIR": str(work),
            "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{args.upstream_port}",
            "LCM_DROPIN_UNLISTED_CONTEXT_LIMIT": "1000000",
        }
    )
    if args.database_url:
        reset_postgres(args.database_url)
        env["LCM_DATABASE_URL"] = args.database_url
    upstream = Upstream(args.upstream_port)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    manage(env, "migrate", "-v", "0")
    token = manage(env, "lcm_create_user", "bench").strip().split()[-1]
    command = [sys.executable, str(ROOT / "manage.py"), "lcm_serve", "--port", str(args.port)]
    command.append("--no-demo")
    if args.profile:  # sampled by py-spy (pip install py-spy), collapsed stacks
        spy = str(Path(sys.executable).with_name("py-spy"))
        command = [
            spy,
            "record",
            "-t",
            "-r",
            "500",
            "-f",
            "raw",
            "-o",
            args.profile,
            "--",
            *command,
        ]
        command += ["--no-worker", "--no-migrate"]
    server = subprocess.Popen(
        command,
        env=env,
        cwd=ROOT,
        stdout=open(work / "serve.log", "w"),  # noqa: SIM115 (outlives this statement)
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    report: dict = {"database": "postgresql" if args.database_url else "sqlite"}
    try:
        wait_for(f"http://127.0.0.1:{args.port}/anthropic")
        report["load_before"] = [round(x, 2) for x in os.getloadavg()]
        pid = None if args.profile else server.pid
        report.update(measure(token, args.port, upstream, args, pid))
        report["load_after"] = [round(x, 2) for x in os.getloadavg()]
    finally:
        os.killpg(server.pid, signal.SIGINT if args.profile else signal.SIGTERM)
        server.wait(timeout=60)
        upstream.shutdown()
        print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
