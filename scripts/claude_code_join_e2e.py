#!/usr/bin/env python3
"""The real Claude Code CLI through the drop-in while the watcher follows its session file:
one session stored once, and `/compact` typed in it (docs/capture.md, "Seen through the
drop-in too"; docs/drop-in.md, "`/compact` typed by the user").

    .venv/bin/python scripts/claude_code_join_e2e.py [--out DIR] [--base-port 8301]
        [--record tests/dropin/data/claude_code_compact]

Uses the pieces of scripts/claude_code_e2e.py (the scripted upstream, the recording
proxy, `lcm_serve`) on three ports from --base-port, with `manage.py lcm_watch --poll`
following the CLI's `~/.claude/projects` at the same time. Runs: a Bash/Read/Edit tool
loop (`-p`), `--continue`, `--continue -p /compact`, `--continue` after it. Checks (JSON
report): every CLI request answered 2xx; the user's conversations (one for the session,
side requests aside); tool call and result ids held by more than one message (0 when
stored once; texts may repeat); the agent compactions linked; the threads (no fork). `--record DIR` writes the compaction request and
the one after it, shortened, as test data.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import claude_code_e2e as e2e  # noqa: E402

CHECK = """
import json
from collections import Counter
from conversations.models import Conversation, Message, MessagePart, Summary
from dropin.models import Thread
from importers.join import part_keys
from importers.models import JoinedRecord
out = {"conversations": [], "threads": list(Thread.objects.values("key", "parent_id",
       "message_count", "conversation_id"))}
for c in Conversation.objects.order_by("pk"):
    held = Counter()
    seen = set()
    for row in MessagePart.objects.filter(message__conversation=c).values(
            "message_id", "part_type", "metadata", "tool_call_id", "tool_input",
            "tool_output", "tool_error", "text_content"):
        for key in part_keys(row["part_type"], row):
            if (row["message_id"], key) not in seen:
                seen.add((row["message_id"], key))
                held[key] += 1
    ids = Counter(Message.objects.filter(conversation=c).values_list("external_id", flat=True))
    out["conversations"].append({
        "id": c.pk, "session_id": c.session_id, "title": c.title[:60],
        "messages": Message.objects.filter(conversation=c).count(),
        "from_dropin": Message.objects.filter(conversation=c,
                                              external_id__startswith="dropin:").count(),
        "from_file": Message.objects.filter(conversation=c,
                                            external_id__startswith="claude-code:").count(),
        "joined_records": JoinedRecord.objects.filter(conversation=c)
                          .values("source_id").distinct().count(),
        # Tool call and result ids are unique: held twice is a message stored twice. Texts
        # and thinking may repeat (the scripted upstream thinks the same way twice).
        "tool_keys_held_twice": sum(1 for k, n in held.items() if n > 1
                                    and k.startswith(("call:", "result:"))),
        "other_keys_held_twice": [k for k, n in held.items() if n > 1
                                  and not k.startswith(("call:", "result:"))][:10],
        "agent_compactions": list(Summary.objects.filter(conversation=c,
            model__endswith="(agent compaction)").values_list("pk", "model")),
    })
print(json.dumps(out))
"""


def ports(base: int) -> None:
    e2e.LCM_PORT, e2e.PROXY_PORT, e2e.UPSTREAM_PORT = base, base + 1, base + 2


def record(proxy, directory: Path) -> None:
    """The compaction request and the first one after it, as sent (messages shortened)."""
    directory.mkdir(parents=True, exist_ok=True)
    posts = [r for r in proxy.requests if r["method"] == "POST" and b'"messages"' in r["raw"]]
    for index, request in enumerate(posts):
        body = json.loads(request["raw"])
        text = json.dumps(body["messages"][-1:])
        if any(mark in text for mark in ("CRITICAL: Respond with TEXT ONLY", "detailed summary")):
            after = next((p for p in posts[index + 1 :] if b'"tools":[{' in p["raw"]), None)
            for name, chosen in (("compact_request", request), ("after_compact", after)):
                if chosen is None:
                    continue
                data = json.loads(chosen["raw"])
                data["system"] = "(system prompt left out)"
                data["tools"] = [{k: t[k] for k in ("name",) if k in t} for t in data["tools"]]
                (directory / f"{name}.json").write_text(json.dumps(data, indent=1) + "\n")
            return


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None)
    parser.add_argument("--base-port", type=int, default=8301)
    parser.add_argument("--record", default=None)
    options = parser.parse_args()
    ports(options.base_port)
    work = Path(options.out or tempfile.mkdtemp(prefix="claude-join-e2e-"))
    project, home, data = work / "project", work / "home", work / "data"
    for directory in (project, home, data):
        directory.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "LCM_DATA_DIR": str(data),
        "LCM_DATABASE_URL": os.environ.get("LCM_DATABASE_URL") or f"sqlite:///{data}/e2e.sqlite3",
        "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{e2e.UPSTREAM_PORT}",
        "ANTHROPIC_API_KEY": "sk-ant-server-unused",
    }
    upstream, proxy = e2e.Upstream(200000), e2e.Proxy()
    for server in (upstream, proxy):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    e2e.manage(env, "migrate", "-v", "0")
    token = e2e.manage(env, "lcm_create_user", "e2e").strip().split()[-1]
    log = open(work / "serve.log", "w")  # noqa: SIM115 (the servers outlive this statement)
    manage = [sys.executable, str(ROOT / "manage.py")]
    serve = subprocess.Popen(
        [*manage, "lcm_serve", "--port", str(e2e.LCM_PORT), "--no-demo"],
        env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    watcher = None
    report: dict = {"work": str(work)}
    try:
        e2e.wait_for(f"http://127.0.0.1:{e2e.LCM_PORT}/anthropic")
        projects = home / ".claude" / "projects"
        projects.mkdir(parents=True, exist_ok=True)
        watch = [*manage, "lcm_watch", "--user", "e2e", "--claude-code-dir", str(projects)]
        watch += ["--no-codex", "--no-opencode", "--no-gemini"]
        watcher = subprocess.Popen(
            [*watch, "--poll", "1"], env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        cli_env = {
            k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE"))
        }
        cli_env.update(
            {
                "HOME": str(home),
                "E2E_PROJECT": str(project),
                "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{e2e.PROXY_PORT}/anthropic",
                "ANTHROPIC_API_KEY": "sk-ant-the-users-own-key",
                "ANTHROPIC_CUSTOM_HEADERS": f"X-LCM-Token: {token}",
                "DISABLE_AUTOUPDATER": "1",
                "DISABLE_TELEMETRY": "1",
            }
        )
        os.environ["E2E_PROJECT"] = str(project)
        runs = report["runs"] = {}
        steps = [
            ("tools", ["-p", "E2E-TOOLS: write the marker, read it, edit it.",
                       "--allowedTools", "Bash,Read,Edit", "--permission-mode", "acceptEdits"]),
            ("continue", ["--continue", "-p", "What did you just do?"]),
            ("compact", ["--continue", "-p", "/compact"]),
            ("after_compact", ["--continue", "-p", "Say what the summary kept."]),
        ]  # fmt: skip
        for name, args in steps:
            done = e2e.run_claude(cli_env, project, *args)
            runs[name] = {
                "rc": done.returncode,
                "out": done.stdout[-200:],
                "err": done.stderr[-300:],
            }
            time.sleep(2)  # the watcher's poll
        time.sleep(3)
        os.killpg(watcher.pid, signal.SIGTERM)
        watcher.wait(timeout=30)
        watcher = None
        e2e.manage(env, *watch[2:], "--once")  # what the watcher had not reached yet
        report["http"] = {
            "cli_requests": len(proxy.requests),
            "statuses": sorted({r["status"] for r in proxy.requests}),
        }
        report["files"] = [str(p.relative_to(projects)) for p in projects.rglob("*.jsonl")]
        report["stored"] = json.loads(
            e2e.manage(env, "shell", "-c", CHECK).strip().splitlines()[-1]
        )
        e2e.dump(work, proxy, upstream)
        if options.record:
            record(proxy, Path(options.record))
    finally:
        if watcher is not None:
            os.killpg(watcher.pid, signal.SIGTERM)
        os.killpg(serve.pid, signal.SIGTERM)
        serve.wait(timeout=30)
        upstream.shutdown()
        proxy.shutdown()
        print(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    main()
