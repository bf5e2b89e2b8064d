"""MCP benchmark: tool-call latency through both transports, measured with the SDK's own
client against real processes (uvicorn serving lcmsite.asgi at /mcp/, and
`manage.py lcm_mcp` over stdio), on the configured database.

Data: one conversation of `ctx.n(2_000)` messages compacted by the deterministic
summarizer, owned by the bench user. Figures: p50/p95 of `lcm_describe` on the top summary
and of a full-text `lcm_grep` in that conversation, over _RUNS calls each, and the time
from spawning the stdio server to its first answer.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx2
from django.db import connection
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from benchmarks.conversations import bench_user, new_conversation, synthetic_payload
from benchmarks.harness import BenchContext, BenchRow, benchmark, p50, percentile
from compaction.engine import compact_conversation
from compaction.summarizers import DeterministicSummarizer
from conversations.inputs import parse_message
from conversations.models import Summary
from conversations.services import messages_append
from tokens.services import token_rotate

ROOT = Path(__file__).resolve().parents[1]
_RUNS = 200


def _database_url() -> str:
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def _child_env() -> dict[str, str]:
    return {**os.environ, "LCM_DATABASE_URL": _database_url(), "PYTHONUNBUFFERED": "1"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _time_calls(session: ClientSession, name: str, arguments: dict) -> list[float]:
    samples = []
    for _ in range(_RUNS):
        start = time.perf_counter()
        result = await session.call_tool(name, arguments)
        samples.append((time.perf_counter() - start) * 1000)
        assert result.is_error is False, result
    return samples


async def _measure(session: ClientSession, summary_id: str, conversation_id: int) -> dict:
    await session.call_tool("lcm_describe", {"id": summary_id})  # warm-up
    return {
        "lcm_describe": await _time_calls(session, "lcm_describe", {"id": summary_id}),
        "lcm_grep": await _time_calls(
            session, "lcm_grep", {"query": "retry", "conversation_id": conversation_id}
        ),
    }


def _rows(transport: str, measured: dict) -> list[BenchRow]:
    return [
        BenchRow(
            f"MCP {transport}: {tool} p50 / p95",
            p50(samples),
            "ms",
            detail=f"p95 {percentile(samples, 0.95):.1f} ms over {len(samples)} calls",
        )
        for tool, samples in measured.items()
    ]


@benchmark("mcp")
def mcp(ctx: BenchContext) -> list[BenchRow]:
    conversation = new_conversation("mcp")
    count = ctx.n(2_000)
    for start in range(0, count, 1_000):
        batch = [
            parse_message(synthetic_payload(i)) for i in range(start, min(count, start + 1_000))
        ]
        messages_append(conversation_id=conversation.pk, messages=batch)
    compact_conversation(
        conversation_id=conversation.pk, mode="full", summarizer=DeterministicSummarizer()
    )
    top = Summary.objects.filter(conversation=conversation).order_by("-depth", "-pk").first()
    token = token_rotate(user=bench_user(), name="bench")
    rows: list[BenchRow] = []

    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "lcmsite.asgi:application", "--port", str(port),
         "--log-level", "warning"],
        cwd=ROOT, env=_child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("uvicorn did not start") from None
                time.sleep(0.1)

        async def over_http() -> dict:
            headers = {"Authorization": f"Bearer {token.key}"}
            async with (
                httpx2.AsyncClient(headers=headers, timeout=60) as http,
                streamable_http_client(f"http://127.0.0.1:{port}/mcp/", http_client=http) as (
                    read,
                    write,
                ),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                return await _measure(session, top.pk, conversation.pk)

        rows += _rows("Streamable HTTP", anyio.run(over_http))
    finally:
        server.terminate()
        server.wait(timeout=10)

    params = StdioServerParameters(
        command=sys.executable,
        args=["manage.py", "lcm_mcp", "--user", bench_user().username],
        env=_child_env(),
        cwd=str(ROOT),
    )

    async def over_stdio() -> tuple[float, dict]:
        started = time.perf_counter()
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            ready = (time.perf_counter() - started) * 1000
            return ready, await _measure(session, top.pk, conversation.pk)

    ready, measured = anyio.run(over_stdio)
    rows.append(BenchRow("MCP stdio: spawn to initialized", ready, "ms"))
    rows += _rows("stdio", measured)
    ctx.notes.append(
        f"MCP: {count} messages, {Summary.objects.filter(conversation=conversation).count()} "
        f"summaries; {connection.vendor}; each call runs in a worker thread of the server."
    )
    return rows
