#!/usr/bin/env python3
"""End-to-end: the real Claude Code CLI compacts its own session and the product's hooks hand
back what its summary dropped (docs/capture.md, "Repair after the agent's compaction").

    scripts/agent-clis install claude
    LCM_DATABASE_URL=postgres://postgres@127.0.0.1:5432/h_repair \\
        .venv/bin/python scripts/agent_repair_acceptance.py [--port 8141] [--serve-port 8142]
        [--keep DIR] [--record tests/mcpserver/recordings]

What it does, all on this machine (no network, no key):

1. A scripted Anthropic upstream of its own on --port (`/v1/messages`, streaming or not;
   `count_tokens`): it drives a small piece of work in a scratch project (read a file, run
   a check that fails, edit the file, run the check again), answers Claude Code's
   compaction request with a thin summary (as agents' summaries often are: the goal and
   nothing of the way), then answers anything else briefly. Every request is recorded.
2. `manage.py lcm_serve` on --serve-port (the served app, its worker) and `manage.py
   lcm_connect claude-code --user NAME --write` into a scratch `CLAUDE_CONFIG_DIR`: the MCP
   entry and the SessionStart / PreCompact / PostCompact hooks.
3. `claude -p --input-format stream-json` in the project: the work prompt, then `/compact`,
   then a follow-up prompt, in one session.
4. Checks: the request after the compaction carries the addendum (the hook's
   additionalContext reached the model's context); the session's record holds the agent
   compaction with what it kept and dropped and what was handed back; the explorer page of
   the session shows them. Prints a report; exit status 1 when a check fails.

`--record DIR` also writes the hook inputs Claude Code sent (sanitized: the scratch paths
replaced by /work/app and ~/.claude) as small JSON files, the test data of
tests/mcpserver/test_hook_repair_recorded.py.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
USER = "repair-acceptance"
THIN_SUMMARY = (
    "<summary>\n1. Primary Request: the user wanted the cache fixed.\n"
    "2. Current Work: it is done.\n</summary>"
)
CACHE_PY = "TTL = 60\n\n\ndef ttl_seconds():\n    return TTL\n"
CHECK_PY = (
    "import sys\nsys.path.insert(0, 'src')\nfrom cache import ttl_seconds\n"
    "assert ttl_seconds() == 300, 'AssertionError: entries expire after %s s' % ttl_seconds()\n"
    "print('check passed: entries expire after 300 s')\n"
)
PROMPT = (
    "Make the cache entries expire after 300 seconds instead of 60. "
    "Verify with python3 check_cache.py, and keep the ttl_seconds() name."
)
FOLLOW_UP = "Where did we leave the cache work?"
ADDENDUM_MARK = "[lcm] Your compaction summary left out"
COMPACTION_MARKS = ("create a detailed summary", "CRITICAL: Respond with TEXT ONLY")


# -- the scripted upstream --------------------------------------------------------------


def _texts(message: dict) -> list[str]:
    content = message.get("content")
    if isinstance(content, str):
        return [content]
    found = []
    for block in content or []:
        if block.get("type") == "text":
            found.append(block.get("text", ""))
        elif block.get("type") == "tool_result":
            inner = block.get("content")
            found.extend(
                [inner] if isinstance(inner, str) else [b.get("text", "") for b in inner or []]
            )
    return found


def _tool_names(messages: list[dict]) -> dict[str, str]:
    names = {}
    for message in messages:
        if message.get("role") == "assistant" and isinstance(message.get("content"), list):
            for block in message["content"]:
                if block.get("type") == "tool_use":
                    names[block["id"]] = block["name"]
    return names


class Upstream:
    """Decides each answer from the request: the compaction request, a tool result of the
    work (which tool, and whether it failed), or a prompt."""

    def __init__(self, project: Path) -> None:
        self.project = project
        self.requests: list[dict] = []
        self.compacted_at: int | None = None
        self.lock = threading.Lock()

    def answer(self, body: dict) -> list[dict]:
        with self.lock:
            self.requests.append(body)
            number = len(self.requests)
        messages = body.get("messages") or []
        last = messages[-1] if messages else {}
        text = "\n".join(_texts(last))
        if any(mark in text for mark in COMPACTION_MARKS):
            self.compacted_at = number
            return [{"type": "text", "text": THIN_SUMMARY}]
        results = [
            b
            for b in (last.get("content") or [])
            if isinstance(b, dict) and b.get("type") == "tool_result"
        ]
        if results:
            name = _tool_names(messages).get(results[-1].get("tool_use_id"), "")
            return self._after_tool(name, text, bool(results[-1].get("is_error")))
        if "300 seconds" in text:
            path = str(self.project / "src" / "cache.py")
            return [_use("Read", {"file_path": path})]
        return [
            {"type": "text", "text": "We changed src/cache.py to read the TTL; the check passes."}
        ]

    def _after_tool(self, name: str, output: str, failed: bool) -> list[dict]:
        check = {"command": "python3 check_cache.py", "description": "Run the cache check"}
        if name == "Read":
            return [_use("Bash", check)]
        if name == "Bash" and ("AssertionError" in output or failed):
            edit = {
                "file_path": str(self.project / "src" / "cache.py"),
                "old_string": "TTL = 60",
                "new_string": "TTL = 300  # entries expire after 300 seconds",
            }
            said = "The TTL is hard-coded to 60, so I'll set it to 300 instead of adding a setting."
            return [{"type": "text", "text": said}, _use("Edit", edit)]
        if name == "Edit":
            return [_use("Bash", check)]
        return [
            {
                "type": "text",
                "text": "Done: entries now expire after 300 seconds and the check passes. "
                "Still to do: a test for eviction.",
            }
        ]


def _use(name: str, given: dict) -> dict:
    return {
        "type": "tool_use",
        "id": f"toolu_{uuid.uuid4().hex[:20]}",
        "name": name,
        "input": given,
    }


def _events(content: list[dict], model: str) -> list[tuple[str, dict]]:
    stop = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
    usage = {"input_tokens": 1200, "output_tokens": 40}
    events = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": f"msg_{uuid.uuid4().hex[:20]}",
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
    ]
    for index, block in enumerate(content):
        if block["type"] == "text":
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        events += [
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            ),
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": index}),
        ]
    events += [
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 40},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return events


def serve_upstream(upstream: Upstream, port: int) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_HEAD(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self) -> None:
            body = json.loads(
                self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}"
            )
            if "count_tokens" in self.path:
                return self._json({"input_tokens": 1200})
            content = upstream.answer(body)
            model = body.get("model", "claude-test")
            if not body.get("stream"):
                stop = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
                return self._json(
                    {
                        "id": f"msg_{uuid.uuid4().hex[:20]}",
                        "type": "message",
                        "role": "assistant",
                        "model": model,
                        "content": content,
                        "stop_reason": stop,
                        "stop_sequence": None,
                        "usage": {"input_tokens": 1200, "output_tokens": 40},
                    }
                )
            data = b"".join(
                f"event: {name}\ndata: {json.dumps(payload)}\n\n".encode()
                for name, payload in _events(content, model)
            )
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _json(self, payload: dict) -> None:
            data = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


# -- the run ----------------------------------------------------------------------------


def _manage(env: dict, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return done.stdout


def _claude() -> str:
    found = subprocess.run(
        [str(ROOT / "scripts" / "agent-clis"), "path", "claude"], capture_output=True, text=True
    )
    if found.returncode:
        sys.exit(
            found.stderr.strip() or "claude is not installed: scripts/agent-clis install claude"
        )
    return found.stdout.strip()


def _record_hook_inputs(settings_file: Path, log: Path) -> None:
    """Beside our hooks, one that appends each hook input to `log` (what Claude Code sent)."""
    settings = json.loads(settings_file.read_text())
    for event in ("SessionStart", "PreCompact", "PostCompact", "UserPromptSubmit"):
        command = f"cat >> {log} && echo >> {log}"
        settings["hooks"].setdefault(event, []).append(
            {"hooks": [{"type": "command", "command": command, "timeout": 10}]}
        )
    settings_file.write_text(json.dumps(settings, indent=2))


def _wait_for(url: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except urllib.error.HTTPError:
            return  # it answered
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"{url} did not answer within {seconds:.0f} s")


RECORD_QUERY = """
import json
from conversations.models import Conversation, Summary
from importers.models import AgentCompactionRepair
conversation = Conversation.objects.get(session_id=SESSION)
summaries = Summary.objects.filter(conversation=conversation, model__endswith="(agent compaction)")
rows = []
for summary in summaries:
    repair = AgentCompactionRepair.objects.filter(summary=summary).first()
    fidelity = getattr(summary, "fidelity", None)
    rows.append({
        "summary_id": summary.pk,
        "messages_replaced": summary.messages.count() if hasattr(summary, "messages") else None,
        "kept": getattr(fidelity, "kept", None),
        "dropped": getattr(fidelity, "dropped", None),
        "repair_tokens": repair.tokens if repair else None,
        "repair_text": repair.text if repair else None,
        "deliveries": repair.deliveries if repair else None,
        "measured": repair.measured if repair else None,
    })
print(json.dumps({"conversation_id": conversation.pk, "agent_compactions": rows}))
"""


def _explorer_page(port: int, password: str, conversation_id: int) -> str:
    """The session's page in the served explorer, signed in as the user."""
    import http.cookiejar
    import re
    import urllib.parse

    base = f"http://127.0.0.1:{port}"
    opener = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
    )
    form = opener.open(f"{base}/accounts/login/", timeout=30).read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form).group(1)
    data = urllib.parse.urlencode(
        {"username": USER, "password": password, "csrfmiddlewaretoken": token}
    ).encode()
    request = urllib.request.Request(f"{base}/accounts/login/", data=data)
    request.add_header("Referer", f"{base}/accounts/login/")
    opener.open(request, timeout=30)
    return opener.open(f"{base}/conversations/{conversation_id}/", timeout=60).read().decode()


def run(args) -> int:
    scratch = Path(args.keep or tempfile.mkdtemp(prefix="lcm-repair-accept-"))
    project, config, home = scratch / "project", scratch / "claude-config", scratch / "home"
    for folder in (project / "src", config, home):
        folder.mkdir(parents=True, exist_ok=True)
    (project / "src" / "cache.py").write_text(CACHE_PY)
    (project / "check_cache.py").write_text(CHECK_PY)
    data_dir = scratch / "lcm-data"
    data_dir.mkdir(exist_ok=True)
    env = {
        **os.environ,
        "LCM_DATA_DIR": str(data_dir),
        "CLAUDE_CONFIG_DIR": str(config),
        "HOME": str(home),
    }
    if not env.get("LCM_DATABASE_URL"):
        print("note: LCM_DATABASE_URL is not set: the SQLite database in the scratch folder")
    _manage(env, "migrate", "-v0")
    password = uuid.uuid4().hex
    _manage(env, "lcm_create_user", USER, "--password", password)
    connected = _manage(env, "lcm_connect", "claude-code", "--user", USER, "--write")
    hook_log = scratch / "hook-inputs.jsonl"
    _record_hook_inputs(config / "settings.json", hook_log)

    upstream = Upstream(project)
    upstream_server = serve_upstream(upstream, args.port)
    serve_log = (scratch / "serve.log").open("w")  # closed with the server, in `finally`
    serve = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "manage.py"),
            "lcm_serve",
            "--port",
            str(args.serve_port),
            "--no-demo",
        ],
        env=env,
        stdout=serve_log,
        stderr=subprocess.STDOUT,
    )
    try:
        _wait_for(f"http://127.0.0.1:{args.serve_port}/admin/login/", 120)
        session = str(uuid.uuid4())
        outcome = _run_claude(args, env, project, session, scratch)
        record = json.loads(
            _manage(env, "shell", "-c", f"SESSION={session!r}\n" + RECORD_QUERY)
            .strip()
            .splitlines()[-1]
        )
        record["page"] = _explorer_page(args.serve_port, password, record["conversation_id"])
        (scratch / "explorer-page.html").write_text(record["page"])
    finally:
        serve.terminate()
        serve.wait(timeout=30)
        serve_log.close()
        upstream_server.shutdown()
    return _report(args, upstream, outcome, record, hook_log, scratch, connected)


def _run_claude(args, env: dict, project: Path, session: str, scratch: Path) -> dict:
    """One `claude -p` session fed three user messages: the work, /compact, a follow-up."""
    claude_env = {
        **env,
        "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{args.port}",
        "ANTHROPIC_API_KEY": "sk-ant-local-acceptance",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    lines = [
        {"type": "user", "message": {"role": "user", "content": text}}
        for text in (PROMPT, "/compact", FOLLOW_UP)
    ]
    command = [
        _claude(),
        "-p",
        "--session-id",
        session,
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        "--verbose",
        "--model",
        "claude-sonnet-4-6",
        "--permission-mode",
        "acceptEdits",
        "--allowedTools",
        "Bash,Read,Edit",
    ]
    started = time.monotonic()
    process = subprocess.Popen(
        command,
        cwd=project,
        env=claude_env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=(scratch / "claude.stderr.txt").open("w"),
        text=True,
    )
    out = (scratch / "claude.stdout.jsonl").open("w")
    try:
        for line in lines:  # each message once the one before it has its result
            process.stdin.write(json.dumps(line) + "\n")
            process.stdin.flush()
            for said in process.stdout:
                out.write(said)
                if json.loads(said).get("type") == "result":
                    break
        process.stdin.close()
        out.write(process.stdout.read())
        status = process.wait(timeout=args.timeout)
    finally:
        if process.poll() is None:
            process.kill()
        out.close()
    return {"session": session, "status": status, "seconds": time.monotonic() - started}


def _report(args, upstream, outcome, record, hook_log: Path, scratch: Path, connected) -> int:
    after = upstream.requests[upstream.compacted_at :] if upstream.compacted_at else []
    reached = [
        n
        for n, body in enumerate(after, start=(upstream.compacted_at or 0) + 1)
        if ADDENDUM_MARK in json.dumps(body)
    ]
    compactions = record["agent_compactions"]
    repaired = [row for row in compactions if row["repair_text"]]
    checks = {
        "claude exited 0": outcome["status"] == 0,
        "Claude Code sent its compaction request": upstream.compacted_at is not None,
        "a request after the compaction carries the addendum": bool(reached),
        "the session's record holds the agent compaction": bool(compactions),
        "with what it kept and dropped": any(row["kept"] for row in compactions),
        "and what was handed back, delivered by a hook": any(row["deliveries"] for row in repaired),
        "the explorer's session page shows kept, dropped and handed back": all(
            part in record.get("page", "")
            for part in ("Kept by its summary", "Dropped", "Handed back", "delivered by")
        )
        and any(row["summary_id"] in record.get("page", "") for row in compactions),
    }
    print(f"scratch folder: {scratch}")
    print(
        f"claude session {outcome['session']}: exit {outcome['status']}, "
        f"{outcome['seconds']:.1f} s, {len(upstream.requests)} upstream requests, "
        f"compaction request #{upstream.compacted_at}, addendum in requests {reached}"
    )
    for row in compactions:
        measured = row["measured"] or {}
        print(
            f"agent compaction {row['summary_id']}: kept {row['kept']}, "
            f"handles {measured.get('before', {}).get('score')} -> "
            f"{measured.get('after', {}).get('score')}, relations "
            f"{measured.get('relations_before', {}).get('score')} -> "
            f"{measured.get('relations_after', {}).get('score')}, "
            f"{row['repair_tokens']} tokens handed back, deliveries {row['deliveries']}"
        )
        print(row["repair_text"] or "(nothing handed back)")
    events = (
        [json.loads(line) for line in hook_log.read_text().splitlines() if line.strip()]
        if hook_log.exists()
        else []
    )
    print(
        "hook inputs:",
        [(e.get("hook_event_name"), e.get("source") or e.get("trigger")) for e in events],
    )
    if args.record:
        _record(Path(args.record), events, scratch, outcome["session"])
    for name, ok in checks.items():
        print(f"{'ok  ' if ok else 'FAIL'} {name}")
    return 0 if all(checks.values()) else 1


_LISTINGS = (
    "skill_listing",
    "agent_listing_delta",
    "mcp_instructions_delta",
    "deferred_tools_delta",
)


def _sanitize(text: str, scratch: Path) -> str:
    project = str(scratch / "project")
    mangled = project.replace("/", "-").replace(".", "-")
    text = text.replace(str(scratch / "claude-config"), "~/.claude")
    text = text.replace(mangled, "-work-app").replace(project, "/work/app")
    return text.replace(str(scratch), "/tmp")


def _record(folder: Path, events: list[dict], scratch: Path, session: str) -> None:
    """The hook inputs and the session's transcript, sanitized (the scratch paths replaced
    by /work/app and ~/.claude; the long skill, agent and MCP listings left out)."""
    folder.mkdir(parents=True, exist_ok=True)
    for event in events:
        name = event.get("hook_event_name", "hook")
        which = event.get("source") or event.get("trigger") or ""
        text = _sanitize(json.dumps(event, indent=2, sort_keys=True), scratch)
        (folder / f"claude-code-2.1.197-{name}{'-' + which if which else ''}.json").write_text(
            text + "\n"
        )
    transcript = next((scratch / "claude-config" / "projects").glob(f"*/{session}.jsonl"))
    kept = [
        line
        for line in transcript.read_text().splitlines()
        if (json.loads(line).get("attachment") or {}).get("type") not in _LISTINGS
    ]
    (folder / "claude-code-2.1.197-compacted-session.jsonl").write_text(
        _sanitize("\n".join(kept), scratch) + "\n"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8141, help="The scripted upstream's port.")
    parser.add_argument("--serve-port", type=int, default=8142, help="lcm_serve's port.")
    parser.add_argument("--timeout", type=int, default=300, help="Seconds for the claude run.")
    parser.add_argument("--keep", metavar="DIR", help="Work in DIR (kept) instead of a temp dir.")
    parser.add_argument("--record", metavar="DIR", help="Write the sanitized hook inputs here.")
    return run(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
