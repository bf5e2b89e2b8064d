"""Large-file benchmarks: one message carrying a 1 MB file block, through the real ingest
service (interception, exploration, storage, rows). Registered by `benchmarks/integrity.py`."""

from __future__ import annotations

import json

from django.db import connection

from benchmarks.conversations import new_conversation
from benchmarks.harness import BenchContext, BenchRow, Timer, benchmark, p50
from conversations.inputs import parse_message
from conversations.services import messages_append

_MB = 1_000_000


def _json_file(n: int) -> str:
    rows, size = [], 0
    while size < _MB:
        row = {"id": len(rows), "run": n, "name": f"user {len(rows)}", "tags": ["a", "b"]}
        rows.append(row)
        size += 60
    return json.dumps(rows)


def _log_file(n: int) -> str:
    line = "2026-01-01T00:00:00Z INFO worker-{k} handled request {k} of run {n} in 12 ms\n"
    lines, size = [], 0
    while size < _MB:
        text = line.format(k=len(lines), n=n)
        lines.append(text)
        size += len(text)
    return "".join(lines)


@benchmark("large_files")
def large_files(ctx: BenchContext) -> list[BenchRow]:
    rows = []
    conversation = new_conversation("large-files")
    for label, make, name in (("JSON", _json_file, "data.json"), ("log", _log_file, "app.log")):
        samples = []
        for n in range(ctx.n(10)):
            body = make(n)  # a different file each time: nothing is deduplicated
            payload = parse_message(
                {"role": "user", "content": f'<file name="{name}">{body}</file>'}
            )
            with Timer() as t:
                messages_append(conversation_id=conversation.pk, messages=[payload])
            samples.append(t.seconds * 1000)
        rows.append(
            BenchRow(
                f"ingest of one message with a 1 MB {label} file block, {connection.vendor}, p50",
                p50(samples),
                "ms",
                "",
                f"{len(samples)} files; interception, exploration, storage and rows",
            )
        )
    return rows
