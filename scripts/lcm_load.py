#!/usr/bin/env python
"""Mixed load against the real server for N seconds, then a final-state check; prints the
table for docs/benchmarks.md.

    .venv/bin/python scripts/lcm_load.py [--seconds 60]

Uses the configured database (LCM_DATABASE_URL, else SQLite under LCM_DATA_DIR; migrated
first). It creates a user and 4 conversations of 200 messages, starts `manage.py lcm_serve
--no-worker --no-demo --no-migrate` on a free port, runs 8 writers (single and batch
appends), a compaction loop and 4 readers (assemble, grep, expand) (benchmarks/load.py), stops
the server, and checks: 0 errors, exactly the acknowledged messages stored (seq 1..n),
integrity clean. Exit status 1 if a check fails.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lcmsite.settings")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    options = parser.parse_args()

    import django

    django.setup()
    import httpx2 as httpx
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection

    from benchmarks.harness import machine_line
    from benchmarks.load import run_load
    from conversations.inputs import parse_message
    from conversations.models import Message
    from conversations.services import conversation_create, messages_append
    from integrity.models import ScanMode, Trigger
    from integrity.services import integrity_scan
    from tokens.services import token_issue

    call_command("migrate", interactive=False, verbosity=0)
    from django.contrib.auth import get_user_model

    owner = get_user_model().objects.create_user(username=f"load-{int(time.time())}")
    token = token_issue(user=owner, name="load").key
    conversations = []
    for n in range(4):
        conversation, _ = conversation_create(owner=owner, session_id=f"load-{owner.pk}-{n}")
        inputs = [
            parse_message({"role": "user", "content": f"seed {i}: why does deploy v1.{i} fail"})
            for i in range(200)
        ]
        messages_append(conversation_id=conversation.pk, messages=inputs)
        conversations.append(conversation)
    connection.close()

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, LCM_AUTOCOMPACT_DISABLED="1")
    log_path = Path(settings.DATA_DIR) / f"load-server-{port}.log"
    log = open(log_path, "ab")  # noqa: SIM115 - the server child writes to it until it stops
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "lcm_serve", "--no-worker", "--no-demo"]
        + ["--no-migrate", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            httpx.get(base + "/api/v1/models/", timeout=1)
            break
        except httpx.HTTPError:
            time.sleep(0.1)
    try:
        result = run_load(
            base_url=base,
            token=token,
            conversation_ids=[c.pk for c in conversations],
            seconds=options.seconds,
        )
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(30)

    problems = [e for e in result.errors[:5]]
    for conversation in conversations:
        expected = 200 + result.acknowledged[conversation.pk]
        seqs = list(
            Message.objects.filter(conversation=conversation)
            .order_by("seq")
            .values_list("seq", flat=True)
        )
        if seqs != list(range(1, expected + 1)):
            problems.append(f"conversation {conversation.pk}: {len(seqs)} stored, {expected} acked")
        report = integrity_scan(
            conversation_id=conversation.pk, mode=ScanMode.SCAN, trigger=Trigger.COMMAND
        )
        if report.total_problems:
            problems.append(f"conversation {conversation.pk}: {report.total_problems} problems")
    print(f"{connection.vendor}, {options.seconds:g} s, {machine_line()}")
    print(result.table())
    acked = sum(result.acknowledged.values())
    print(f"messages acknowledged {acked}, lost 0 and duplicated 0 unless listed below")
    for problem in problems:
        print("PROBLEM:", problem)
    if problems or result.errors:
        print(f"server log: {log_path}")
    return 1 if problems or result.errors else 0


if __name__ == "__main__":
    sys.exit(main())
