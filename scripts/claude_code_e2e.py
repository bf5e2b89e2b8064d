#!/usr/bin/env python3
"""The real Claude Code CLI through the served app's Anthropic drop-in, end to end.

    .venv/bin/python scripts/claude_code_e2e.py [--out DIR] [--record tests/dropin/data]

Runs, with no network and no key (scripts/agent-clis installs the CLI; this script never
downloads anything):

    claude  ->  recording proxy (:8102)  ->  manage.py lcm_serve (:8101, /anthropic)
            ->  scripted Anthropic upstream (:8103: streaming, thinking, tool use,
                `prompt is too long` past its window)

Scenarios: `claude -p` one-shot; a multi-turn run whose model calls Bash, Read and Edit
(the CLI really runs them in a scratch project); `claude --continue`; a long session that
passes the upstream's window. Checks: every CLI request answered 2xx; each upstream body
equals what the CLI sent (byte for byte when the server replaced nothing; outside
`messages` otherwise); no `prompt is too long` reached the CLI; messages stored once
(counts); grep finds a command and a path from the tool calls. Prints a JSON report.
`--record DIR` writes the CLI's first requests of each scenario, sanitized and shortened,
as the test data tests/dropin reads.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# LCM_E2E_PORTS="lcm,proxy,upstream" moves them (several runs on one machine).
LCM_PORT, PROXY_PORT, UPSTREAM_PORT = (
    int(port) for port in os.environ.get("LCM_E2E_PORTS", "8101,8102,8103").split(",")
)
MARKER = "lcm-e2e-marker-7"


def sse(name: str, payload: dict) -> bytes:
    return f"event: {name}\ndata: {json.dumps(payload)}\n\n".encode()


# The scripted upstream ---------------------------------------------------------------------


class Upstream(ThreadingHTTPServer):
    """Anthropic Messages, scripted from what it is sent: a tool loop (Bash, Read, Edit)
    when the prompt asks for one, thinking on every answer, `prompt is too long` past
    `window` tokens (4 bytes a token), usage that says what it received."""

    daemon_threads = True

    def __init__(self, window: int):
        super().__init__(("127.0.0.1", UPSTREAM_PORT), _UpstreamHandler)
        self.window = window
        self.requests: list[dict] = []
        self.arrivals: list[float] = []
        self.lock = threading.Lock()


def _last_user(messages: list) -> tuple[str, int]:
    """The last user message's text, and how many tool results the request holds."""
    results = 0
    text = ""
    for message in messages:
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for block in blocks or []:
            if block.get("type") == "tool_result":
                results += 1
        if message.get("role") == "user":
            texts = [b.get("text", "") for b in blocks or [] if b.get("type") == "text"]
            if texts:
                text = "\n".join(texts)
    return text, results


class _UpstreamHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        arrived = time.perf_counter()
        body = json.loads(raw)
        server: Upstream = self.server  # type: ignore[assignment]
        server.arrivals.append(arrived)
        tokens = len(raw) // 4
        with server.lock:
            server.requests.append(
                {"path": self.path, "headers": dict(self.headers.items()), "raw": raw}
            )
        if "count_tokens" in self.path:
            return self._json(200, {"input_tokens": tokens})
        if tokens > server.window:
            message = f"prompt is too long: {tokens} tokens > {server.window} maximum"
            return self._json(
                400,
                {"type": "error", "error": {"type": "invalid_request_error", "message": message}},
            )
        content = self._answer(body)
        usage = {
            "input_tokens": tokens,
            "output_tokens": 40,
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0,
        }
        stop = "tool_use" if content[-1]["type"] == "tool_use" else "end_turn"
        if not body.get("stream"):
            return self._json(
                200,
                {
                    "id": f"msg_e2e{time.time_ns()}",
                    "type": "message",
                    "role": "assistant",
                    "model": body["model"],
                    "content": content,
                    "stop_reason": stop,
                    "stop_sequence": None,
                    "usage": usage,
                },
            )
        self._stream(body["model"], content, stop, usage)

    def _answer(self, body: dict) -> list[dict]:
        text, results = _last_user(body.get("messages") or [])
        project = os.environ.get("E2E_PROJECT", "/tmp")
        thinking = {
            "type": "thinking",
            "thinking": f"Step {results}: deciding.",
            "signature": f"sig-e2e-{results}",
        }
        if "E2E-TOOLS" in json.dumps(body.get("messages") or []) and body.get("tools"):
            calls = [
                (
                    "Bash",
                    {
                        "command": f"echo {MARKER} > {project}/notes.txt",
                        "description": "Write the marker",
                    },
                ),
                ("Read", {"file_path": f"{project}/notes.txt"}),
                (
                    "Edit",
                    {
                        "file_path": f"{project}/notes.txt",
                        "old_string": MARKER,
                        "new_string": MARKER + "-edited",
                    },
                ),
            ]
            if results < len(calls):
                name, tool_input = calls[results]
                return [
                    thinking,
                    {
                        "type": "tool_use",
                        "id": f"toolu_e2e{time.time_ns()}",
                        "name": name,
                        "input": tool_input,
                    },
                ]
        return [thinking, {"type": "text", "text": f"Answer to: {text[-60:]!s}"}]

    def _json(self, status: int, payload: dict):
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, model: str, content: list[dict], stop: str, usage: dict):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        write = self.wfile.write
        write(
            sse(
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": f"msg_e2e{time.time_ns()}",
                        "type": "message",
                        "role": "assistant",
                        "model": model,
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": usage,
                    },
                },
            )
        )
        write(sse("ping", {"type": "ping"}))
        for index, block in enumerate(content):
            if block["type"] == "thinking":
                start = {"type": "thinking", "thinking": "", "signature": ""}
                deltas = [
                    {"type": "thinking_delta", "thinking": block["thinking"]},
                    {"type": "signature_delta", "signature": block["signature"]},
                ]
            elif block["type"] == "tool_use":
                start = {**block, "input": {}}
                deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block["input"])}]
            else:
                start = {"type": "text", "text": ""}
                deltas = [{"type": "text_delta", "text": block["text"]}]
            write(
                sse(
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": start},
                )
            )
            for delta in deltas:
                write(
                    sse(
                        "content_block_delta",
                        {"type": "content_block_delta", "index": index, "delta": delta},
                    )
                )
            write(sse("content_block_stop", {"type": "content_block_stop", "index": index}))
        write(
            sse(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 40},
                },
            )
        )
        write(sse("message_stop", {"type": "message_stop"}))
        self.wfile.flush()
        self.close_connection = True


# The recording proxy (what the CLI really sent) --------------------------------------------


class Proxy(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", PROXY_PORT), _ProxyHandler)
        self.requests: list[dict] = []
        self.lock = threading.Lock()


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _relay(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))
        server: Proxy = self.server  # type: ignore[assignment]
        record = {
            "method": self.command,
            "path": self.path,
            "raw": raw,
            "headers": list(self.headers.items()),
        }
        connection = http.client.HTTPConnection("127.0.0.1", LCM_PORT, timeout=600)
        headers = {
            k: v for k, v in self.headers.items() if k.lower() not in ("host", "accept-encoding")
        }
        connection.request(self.command, self.path, body=raw or None, headers=headers)
        response = connection.getresponse()
        record["status"] = response.status
        record["response_headers"] = dict(response.getheaders())
        self.send_response(response.status)
        for name, value in response.getheaders():
            if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(name, value)
        self.send_header("Connection", "close")
        self.end_headers()
        body = b""
        if self.command != "HEAD":
            while chunk := response.read1(65536) if hasattr(response, "read1") else response.read():
                body += chunk
                self.wfile.write(chunk)
                self.wfile.flush()
        record["response"] = body
        with server.lock:
            server.requests.append(record)
        self.close_connection = True

    do_POST = do_GET = do_HEAD = _relay


# Running it ---------------------------------------------------------------------------------


def manage(env: dict, *args: str) -> str:
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    ).stdout


def wait_for(url: str, seconds: float = 90) -> None:
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=2)
            return
        except Exception:
            time.sleep(0.5)
    raise SystemExit(f"{url} did not answer")


def claude_bin() -> str:
    return subprocess.run(
        [str(ROOT / "scripts" / "agent-clis"), "path", "claude"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def run_claude(
    env: dict, project: Path, *args: str, timeout: int = 240
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [claude_bin(), *args], env=env, cwd=project, capture_output=True, text=True, timeout=timeout
    )


def _outside(body: dict) -> str:
    return json.dumps({k: v for k, v in body.items() if k != "messages"}, sort_keys=True)


def compare(proxy: Proxy, upstream: Upstream) -> dict:
    """Each CLI message request against the upstream request that answered it: the one
    with the same fields outside `messages` (side and main requests run in parallel; an
    upstream request answered `prompt is too long` was sent again smaller; the server's
    own compaction calls, which carry no session, are left out)."""
    cli = [
        r
        for r in proxy.requests
        if r["method"] == "POST" and "/messages" in r["path"] and "count_tokens" not in r["path"]
    ]
    pending: dict[str, list[bytes]] = {}
    for got in upstream.requests:
        if "count_tokens" in got["path"] or len(got["raw"]) // 4 > upstream.window:
            continue
        pending.setdefault(_outside(json.loads(got["raw"])), []).append(got["raw"])
    same = outside = unmatched = 0
    for request in cli:
        candidates = pending.get(_outside(json.loads(request["raw"])), [])
        if request["raw"] in candidates:
            candidates.remove(request["raw"])
            same += 1
        elif candidates:
            candidates.pop(0)
            outside += 1
        else:
            unmatched += 1
    return {
        "cli_requests": len(cli),
        "upstream_requests": len(upstream.requests),
        "equal_bytes": same,
        "equal_outside_messages": outside,
        "unmatched": unmatched,
    }


def cache_share(upstream: Upstream, session_prefix: str) -> dict:
    """The long session's upstream requests replayed through the provider's cache rule
    (tests/support/fake_prompt_cache.py: breakpoints, 20-block lookback): the share of
    input tokens readable from the cache, overall and in the second half (steady state)."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lcmsite.settings")
    import django

    django.setup()
    from tests.support.fake_prompt_cache import AnthropicPromptCache

    cache = AnthropicPromptCache()
    reports = []
    for request in upstream.requests:
        if "count_tokens" in request["path"] or len(request["raw"]) // 4 > upstream.window:
            continue
        body = json.loads(request["raw"])
        if session_prefix not in json.dumps(body.get("metadata")) or not body.get("tools"):
            continue
        reports.append(cache.usage(body))

    def share(rows):
        total = sum(
            r["input_tokens"] + r["cache_read_input_tokens"] + r["cache_creation_input_tokens"]
            for r in rows
        )
        return round(sum(r["cache_read_input_tokens"] for r in rows) / total, 3) if total else None

    return {
        "requests": len(reports),
        "share": share(reports),
        "steady_share": share(reports[len(reports) // 2 :]),
    }


def dump(work: Path, proxy: Proxy, upstream: Upstream) -> None:
    """Every request both ways, for reading after the run (credentials left out)."""
    for name, requests in (("cli", proxy.requests), ("upstream", upstream.requests)):
        with open(work / f"{name}-requests.jsonl", "w") as out:
            for request in requests:
                headers = request["headers"]
                items = headers.items() if isinstance(headers, dict) else headers
                out.write(
                    json.dumps(
                        {
                            "path": request["path"],
                            "headers": [
                                [k, v]
                                for k, v in items
                                if k.lower() not in ("x-api-key", "x-lcm-token", "authorization")
                            ],
                            "raw": request["raw"].decode("utf-8", "replace"),
                            "status": request.get("status"),
                            "response_headers": request.get("response_headers"),
                        }
                    )
                    + "\n"
                )


def counts(db: Path) -> dict:
    connection = sqlite3.connect(db)
    try:
        rows = connection.execute(
            "SELECT role, count(*) FROM conversations_message GROUP BY role"
        ).fetchall()
        conversations = connection.execute("SELECT count(*) FROM dropin_thread").fetchone()[0]
        duplicates = connection.execute(
            "SELECT count(*) FROM (SELECT conversation_id, external_id FROM conversations_message "
            "WHERE external_id IS NOT NULL GROUP BY 1, 2 HAVING count(*) > 1)"
        ).fetchone()[0]
    finally:
        connection.close()
    return {"by_role": dict(rows), "threads": conversations, "duplicate_ids": duplicates}


def grep(token: str, query: str) -> int:
    url = f"http://127.0.0.1:{LCM_PORT}/api/v1/grep/"
    request = urllib.request.Request(
        url,
        data=json.dumps({"query": query, "mode": "full_text"}).encode(),
        method="POST",
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        data = json.loads(response.read())
    return len(data.get("results", data if isinstance(data, list) else []))


def record(proxy: Proxy, directory: Path) -> None:
    """The CLI's real requests as small test data: the first message request of each
    scenario, the tool loop's second request; tools and long texts shortened."""
    directory.mkdir(parents=True, exist_ok=True)
    picked = [r for r in proxy.requests if r["method"] == "POST" and "/messages" in r["path"]]
    for index, request in enumerate(picked[:12]):
        body = json.loads(request["raw"])
        body["tools"] = [
            t for t in body.get("tools", []) if t.get("name") in ("Bash", "Read", "Edit")
        ]
        for tool in body["tools"]:
            tool["description"] = tool.get("description", "")[:200]
        for block in body.get("system") or []:
            block["text"] = block["text"][:300]
        for message in body.get("messages", []):
            if isinstance(message["content"], str):
                message["content"] = message["content"][:400]
                continue
            for block in message["content"]:
                if block.get("type") == "text":
                    block["text"] = block["text"][:400]
        user_id = json.loads((body.get("metadata") or {}).get("user_id") or "{}")
        if user_id.get("device_id"):  # sanitized: the machine's id
            user_id["device_id"] = "0" * 64
            body["metadata"]["user_id"] = json.dumps(user_id, separators=(",", ":"))
        headers = [
            [k, v]
            for k, v in request["headers"]
            if k.lower()
            not in (
                "x-api-key",
                "host",
                "content-length",
                "connection",
                "accept-encoding",
                "x-lcm-token",
            )
        ]
        (directory / f"claude_code_request_{index:02d}.json").write_text(
            json.dumps(
                {
                    "note": "Claude Code request recorded by scripts/claude_code_e2e.py (shortened)",
                    "path": request["path"],
                    "headers": headers,
                    "body": body,
                },
                ensure_ascii=False,
                indent=1,
            )
        )


def added_before_first_byte(token: str, upstream: Upstream, runs: int = 30) -> dict:
    """Server time added before the upstream's first byte for a Claude Code request whose
    history holds 1,000 messages (growing by 2 a request), through the served app, minus
    the same request sent straight to the upstream (same run): p50 and p95 in ms."""
    template = json.loads((ROOT / "tests/dropin/data/claude_code_oneshot.json").read_text())
    body = template["body"]
    body["metadata"] = {"user_id": json.dumps({"session_id": f"bench-{time.time_ns()}"})}
    history = []
    for n in range(1000):
        history.append(
            {
                "role": "user" if n % 2 == 0 else "assistant",
                "content": f"message {n}: " + "word " * 30,
            }
        )
    headers = {
        "Content-Type": "application/json",
        "anthropic-version": "2023-06-01",
        "x-api-key": "sk-ant-own",
        "X-LCM-Token": token,
    }

    def timed(port: int, path: str, raw: bytes) -> float:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        before = len(upstream.arrivals)
        sent = time.perf_counter()
        connection.request("POST", path, body=raw, headers=headers)
        response = connection.getresponse()
        response.read()
        if response.getheader("X-LCM-Server-Ms"):
            server_ms.append(float(response.getheader("X-LCM-Server-Ms")))
        connection.close()
        return (upstream.arrivals[before] - sent) * 1000

    added: list[float] = []
    server_ms: list[float] = []
    for run in range(runs):
        history += [{"role": "user", "content": f"question {run}"}]
        raw = json.dumps({**body, "messages": history}, separators=(",", ":")).encode()
        through = timed(LCM_PORT, "/anthropic/v1/messages?beta=true", raw)
        direct = timed(UPSTREAM_PORT, "/v1/messages?beta=true", raw)
        added.append(through - direct)
        history.append(
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "thinking",
                        "thinking": f"Step {run}: deciding.",
                        "signature": f"sig-e2e-{run}",
                    },
                    {"type": "text", "text": f"Answer to: question {run}"},
                ],
            }
        )
    added.sort()
    return {
        "runs": runs,
        "p50_ms": round(added[len(added) // 2], 1),
        "p95_ms": round(added[int(len(added) * 0.95) - 1], 1),
        # X-LCM-Server-Ms: the server's own preparation (auth, parse, store, assemble)
        "server_own_p50_ms": round(sorted(server_ms)[len(server_ms) // 2], 1)
        if server_ms
        else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out", default=None, help="where the run's files go (default: a temp dir)"
    )
    parser.add_argument("--record", default=None, help="write the CLI's requests as test data here")
    parser.add_argument(
        "--window", type=int, default=60000, help="the upstream's window in tokens (default 60000)"
    )
    parser.add_argument("--long-turns", type=int, default=14, help="turns of the long session")
    parser.add_argument(
        "--bench-only",
        action="store_true",
        help="only measure the time added before the first byte (1,000 messages)",
    )
    options = parser.parse_args()
    work = Path(options.out or tempfile.mkdtemp(prefix="claude-e2e-"))
    work.mkdir(parents=True, exist_ok=True)
    project, home, data = work / "project", work / "home", work / "data"
    for directory in (project, home, data):
        directory.mkdir(exist_ok=True)
    db = data / "e2e.sqlite3"
    env = {
        **os.environ,
        "LCM_DATA_DIR": str(data),
        "LCM_DATABASE_URL": f"sqlite:///{db}",
        "DATABASE_URL": "",
        "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{UPSTREAM_PORT}",
        "ANTHROPIC_API_KEY": "sk-ant-server-unused",
        "LCM_DROPIN_UNLISTED_CONTEXT_LIMIT": str(options.window),
    }
    upstream, proxy = Upstream(options.window), Proxy()
    for server in (upstream, proxy):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    manage(env, "migrate", "-v", "0")
    token = manage(env, "lcm_create_user", "e2e").strip().split()[-1]
    serve = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "manage.py"),
            "lcm_serve",
            "--port",
            str(LCM_PORT),
            "--no-demo",
        ],
        env=env,
        cwd=ROOT,
        stdout=open(work / "serve.log", "w"),  # noqa: SIM115 (the server outlives this statement)
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    report: dict = {"work": str(work)}
    try:
        wait_for(f"http://127.0.0.1:{LCM_PORT}/anthropic")
        cli_env = {
            k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE"))
        }
        cli_env.update(
            {
                "HOME": str(home),
                "E2E_PROJECT": str(project),
                "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{PROXY_PORT}/anthropic",
                "ANTHROPIC_API_KEY": "sk-ant-the-users-own-key",
                "ANTHROPIC_CUSTOM_HEADERS": f"X-LCM-Token: {token}",
                "DISABLE_AUTOUPDATER": "1",
                "DISABLE_TELEMETRY": "1",
            }
        )
        os.environ["E2E_PROJECT"] = str(project)
        if options.bench_only:
            report["added_before_first_byte"] = added_before_first_byte(token, upstream)
            return
        runs = report["runs"] = {}
        started = time.time()
        one = run_claude(cli_env, project, "-p", "Say hello in five words.")
        runs["oneshot"] = {"rc": one.returncode, "out": one.stdout[-200:], "err": one.stderr[-300:]}
        tools = run_claude(
            cli_env,
            project,
            "-p",
            "E2E-TOOLS: write the marker, read it, edit it.",
            "--allowedTools",
            "Bash,Read,Edit",
            "--permission-mode",
            "acceptEdits",
        )
        runs["tools"] = {
            "rc": tools.returncode,
            "out": tools.stdout[-200:],
            "err": tools.stderr[-300:],
            "notes": (project / "notes.txt").read_text()
            if (project / "notes.txt").exists()
            else None,
        }
        cont = run_claude(cli_env, project, "--continue", "-p", "What did you just do?")
        runs["continue"] = {
            "rc": cont.returncode,
            "out": cont.stdout[-200:],
            "err": cont.stderr[-300:],
        }
        long_rc = []
        long_from = len(proxy.requests)
        for turn in range(options.long_turns):
            filler = f"Turn {turn}: remember fact-{turn} = {turn * 7919}. " + ("context " * 1500)
            args = ["-p", filler] if turn == 0 else ["--continue", "-p", filler]
            result = run_claude(cli_env, project, *args)
            long_rc.append(result.returncode)
            if result.returncode:
                runs.setdefault("long_errors", []).append(
                    result.stderr[-300:] + result.stdout[-300:]
                )
        long_first = next(
            r
            for r in proxy.requests[long_from:]
            if r["method"] == "POST" and b'"tools":[{' in r["raw"]
        )
        runs["long"] = {"turns": len(long_rc), "failed": sum(1 for rc in long_rc if rc)}
        report["seconds"] = round(time.time() - started, 1)
        report["http"] = {
            "cli_requests": len(proxy.requests),
            "statuses": sorted({r["status"] for r in proxy.requests}),
            "too_long_seen_by_cli": sum(
                b"prompt is too long" in r.get("response", b"") for r in proxy.requests
            ),
            "compacted_answers": sum(
                r["response_headers"].get("X-LCM-Compacted") == "true" for r in proxy.requests
            ),
            "upstream_too_long": sum(
                1 for r in upstream.requests if len(r["raw"]) // 4 > options.window
            ),
        }
        report["bodies"] = compare(proxy, upstream)
        long_session = json.loads(json.loads(long_first["raw"])["metadata"]["user_id"])
        report["cache"] = cache_share(upstream, long_session["session_id"])
        dump(work, proxy, upstream)
        report["stored"] = counts(db)
        try:
            report["grep"] = {
                "command": grep(token, f"echo {MARKER}"),
                "path": grep(token, f"{project}/notes.txt"),
            }
        except Exception as error:  # reported, not fatal: the rest of the report stands
            report["grep"] = {"error": str(error)}
        if options.record:
            record(proxy, Path(options.record))
    finally:
        os.killpg(serve.pid, signal.SIGTERM)
        serve.wait(timeout=30)
        upstream.shutdown()
        proxy.shutdown()
        print(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    main()
