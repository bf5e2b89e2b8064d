"""`manage.py lcm_mcp`'s handshake answered before Django loads (mcpserver/stdio_front.py):
the agent gets `initialize` at once, a `tools/list` from the previous start's list, every
answer exactly once, and the real server behind it for tool calls."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.mcpserver.conftest import child_env

pytestmark = pytest.mark.process
MANAGE = Path(__file__).resolve().parents[2] / "manage.py"


def _request(id, method, **params) -> bytes:
    return (
        json.dumps({"jsonrpc": "2.0", "id": id, "method": method, "params": params}) + "\n"
    ).encode()


def _session(env) -> tuple[float, list[dict]]:
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, str(MANAGE), "lcm_mcp", "--user", "owner"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
    )  # fmt: skip
    init = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    }
    process.stdin.write(_request(1, "initialize", **init))
    process.stdin.flush()
    first = json.loads(process.stdout.readline())
    answered = time.perf_counter() - started
    process.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    process.stdin.write(_request(2, "tools/list"))
    process.stdin.write(_request(3, "tools/call", name="lcm_grep", arguments={"pattern": "zzz"}))
    process.stdin.flush()
    answers = [first] + [json.loads(process.stdout.readline()) for _ in range(2)]
    process.stdin.close()
    assert process.stdout.read() == b""  # nothing answered twice
    process.wait(timeout=60)
    return answered, answers


def test_the_handshake_is_answered_before_the_server_loads_and_each_answer_comes_once(world):
    env = child_env()
    for _ in range(2):  # the first start writes the tools list the second answers early
        answered, answers = _session(env)
        assert [a["id"] for a in answers] == [1, 2, 3]
        assert answers[0]["result"]["serverInfo"]["name"] == "lcm"
        assert "lcm_grep" in {tool["name"] for tool in answers[1]["result"]["tools"]}
        assert "error" not in answers[2]
    assert answered < 5  # the import of Django and the MCP SDK alone takes longer here
