#!/usr/bin/env python
"""Ingest and compaction throughput of several web processes and workers on one
PostgreSQL and one Redis broker; prints the table for docs/benchmarks.md ("Scale-out").

    LCM_DATABASE_URL=postgres://... LCM_REDIS_URL=redis://127.0.0.1:6379/5 \\
        .venv/bin/python scripts/lcm_scale_out.py [--layouts 1x1,3x2] [--seconds 20]

For each layout WEBxWORKERS it makes a fresh user and 8 conversations of 200 messages,
starts WEB × `manage.py lcm_serve --no-worker` and WORKERS × `manage.py qcluster`
(LCM_WORKERS=1 each, a queue of its own), then measures two things:

- ingest: for --seconds, 8 writers (4 appending one message, 4 batches of 20), each
  request to the next web process (round-robin, benchmarks/scale_out.py): acknowledged
  messages per second;
- compaction: then a full compaction is requested for each of the 8 conversations
  (through the web processes, onto the shared queue) and timed until every job is
  terminal: passes (summaries committed) per second.

It stops the processes with SIGTERM and checks that every conversation holds exactly the
acknowledged messages (seq 1..n) and that every job succeeded. Exit status 1 if not.

The summarizer is the built-in offline one (no API key in the children), so a pass costs
CPU and database time here, not a model's latency; with --model-latency S the workers'
summarizer is the Anthropic SDK talking to a local fake Messages API
(tests/support/fake_messages_api.py) that answers each call after S seconds, as a model
would; small leaf chunks (400 tokens) make
many passes. Message indexing is off (LCM_MEMORY_INDEX_MESSAGES=0) and summaries are
embedded with the `hashing` backend, so the figures measure ingest and compaction.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lcmsite.settings")

CONVERSATIONS = 8
SEED_MESSAGES = 200


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(command: list[str], env: dict, log: Path) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, str(ROOT / "manage.py"), *command],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def stop(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


def run_layout(
    web: int, workers: int, seconds: float, model_url: str | None = None
) -> tuple[dict, list[str]]:
    import httpx2 as httpx
    import redis
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.db import connection

    from benchmarks.scale_out import run_ingest
    from compaction.models import CompactionJob
    from conversations.inputs import parse_message
    from conversations.models import Message, Summary
    from conversations.services import conversation_create, messages_append
    from tokens.services import token_issue

    owner = get_user_model().objects.create_user(username=f"scale-{uuid.uuid4().hex[:8]}")
    token = token_issue(user=owner, name="scale-out").key
    ids = []
    for n in range(CONVERSATIONS):
        conversation, _ = conversation_create(owner=owner, session_id=f"scale-{owner.pk}-{n}")
        inputs = [
            parse_message({"role": "user", "content": f"seed {i}: why does deploy v1.{i} fail"})
            for i in range(SEED_MESSAGES)
        ]
        messages_append(conversation_id=conversation.pk, messages=inputs)
        ids.append(conversation.pk)
    connection.close()

    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(
        LCM_WORKERS="1",
        LCM_AUTOCOMPACT_DISABLED="1",
        LCM_MEMORY_INDEX_MESSAGES="0",
        LCM_EMBEDDING_BACKEND="hashing",
        LCM_QUEUE_NAME=f"lcm-scale-bench-{uuid.uuid4().hex[:8]}",
        LCM_LEAF_CHUNK_TOKENS="400",
        LCM_LEAF_TARGET_TOKENS="120",
        LCM_CONDENSED_TARGET_TOKENS="160",
        LCM_LEAF_MIN_FANOUT="4",
        LCM_CONDENSED_MIN_FANOUT="3",
    )
    if model_url:
        env.update(ANTHROPIC_API_KEY="sk-ant-scale-bench", ANTHROPIC_BASE_URL=model_url)
    logs = Path(settings.DATA_DIR)
    processes = [start(["qcluster"], env, logs / f"scale-worker-{n}.log") for n in range(workers)]
    urls = []
    for _ in range(web):
        port = free_port()
        command = ["lcm_serve", "--no-worker", "--no-demo", "--no-migrate", "--port", str(port)]
        processes.append(start(command, env, logs / f"scale-web-{port}.log"))
        urls.append(f"http://127.0.0.1:{port}")
    try:
        for url in urls:
            for _ in range(900):
                try:
                    httpx.get(url + "/api/v1/models/", timeout=1)
                    break
                except httpx.HTTPError:
                    time.sleep(0.1)
        time.sleep(2)  # the workers are up too (they start in parallel with the servers)
        result = run_ingest(
            base_urls=urls, token=token, conversation_ids=ids, seconds=seconds, compact_every=None
        )
        before = Summary.objects.filter(conversation_id__in=ids).count()
        started = time.monotonic()
        for n, conversation_id in enumerate(ids):
            httpx.post(
                f"{urls[n % len(urls)]}/api/v1/conversations/{conversation_id}/compact/",
                json={"mode": "full"},
                headers={"Authorization": f"Token {token}"},
                timeout=60,
            ).raise_for_status()
        deadline = started + 600
        while (
            time.monotonic() < deadline
            and CompactionJob.objects.filter(
                conversation_id__in=ids, state__in=["pending", "running"]
            ).exists()
        ):
            time.sleep(0.1)
        compaction_seconds = time.monotonic() - started
        passes = Summary.objects.filter(conversation_id__in=ids).count() - before
    finally:
        stop(processes)
        redis.Redis.from_url(os.environ["LCM_REDIS_URL"]).delete(
            f"django_q:{env['LCM_QUEUE_NAME']}:q"
        )

    problems = list(result.errors[:5])
    for conversation_id in ids:
        expected = SEED_MESSAGES + result.acknowledged[conversation_id]
        seqs = list(
            Message.objects.filter(conversation_id=conversation_id)
            .order_by("seq")
            .values_list("seq", flat=True)
        )
        if seqs != list(range(1, expected + 1)):
            problems.append(f"conversation {conversation_id}: {len(seqs)} stored, {expected} acked")
    states = set(
        CompactionJob.objects.filter(conversation_id__in=ids).values_list("state", flat=True)
    )
    if states != {"succeeded"}:
        problems.append(f"compaction jobs ended {sorted(states)}")
    row = {
        "layout": f"{web} web + {workers} worker{'s' if workers > 1 else ''}",
        "messages": result.messages,
        "msg_s": result.messages / seconds,
        "requests_s": sum(result.requests.values()) / seconds,
        "passes": passes,
        "compaction_s": compaction_seconds,
        "passes_s": passes / compaction_seconds,
        "errors": len(result.errors),
    }
    return row, problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layouts", default="1x1,3x2", help="WEBxWORKERS,... (default 1x1,3x2)")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument(
        "--model-latency",
        type=float,
        default=0.0,
        help="seconds per summarizer call, through a local fake Messages API (default 0: "
        "the offline summarizer)",
    )
    options = parser.parse_args()
    if not os.environ.get("LCM_REDIS_URL"):
        parser.error("set LCM_REDIS_URL (the shared broker), e.g. redis://127.0.0.1:6379/5")

    # This process only seeds: it queues nothing (no autocompaction, no message indexing).
    os.environ.update(LCM_AUTOCOMPACT_DISABLED="1", LCM_MEMORY_INDEX_MESSAGES="0")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from benchmarks.harness import machine_line

    if connection.vendor != "postgresql":
        parser.error("several web processes need PostgreSQL: set LCM_DATABASE_URL")
    call_command("migrate", interactive=False, verbosity=0)

    rows, problems = [], []
    with contextlib.ExitStack() as stack:
        model_url = None
        if options.model_latency > 0:
            from tests.support.fake_messages_api import FakeMessagesAPI, message

            api = stack.enter_context(FakeMessagesAPI())
            api.enqueue(*[message("A short summary.", delay=options.model_latency)] * 20000)
            model_url = api.base_url
        for layout in options.layouts.split(","):
            web, workers = (int(n) for n in layout.lower().split("x"))
            row, found = run_layout(web, workers, options.seconds, model_url)
            rows.append(row)
            problems += found
    load = os.getloadavg()
    summarizer = (
        f"summarizer: fake Messages API, {options.model_latency:g} s per call"
        if options.model_latency
        else "summarizer: offline"
    )
    print(
        f"{options.seconds:g} s per layout, {summarizer}, {machine_line()}, "
        f"load average {load[0]:.2f}"
    )
    print(
        "| layout | messages | ingest msg/s | append requests/s | passes | compaction s "
        "| passes/s | errors |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['layout']} | {r['messages']} | {r['msg_s']:.0f} | {r['requests_s']:.1f} "
            f"| {r['passes']} | {r['compaction_s']:.1f} | {r['passes_s']:.1f} | {r['errors']} |"
        )
    for problem in problems:
        print("PROBLEM:", problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
