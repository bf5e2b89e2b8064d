"""Both MCP transports, driven by the official SDK client against real processes:
stdio (`manage.py lcm_mcp --user owner`) and Streamable HTTP (uvicorn serving
lcmsite.asgi at /mcp/)."""

from __future__ import annotations

import json
import sys
from contextlib import asynccontextmanager

import anyio
import httpx2
import pytest
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import INVALID_PARAMS

from retrieval.tool_definitions import TOOL_DEFINITIONS
from tests.mcpserver.conftest import ROOT, McpWorld, child_env
from turns.models import StateCheckpoint, UserTurn

pytestmark = pytest.mark.process(portable=True)

LCM_TOOL_NAMES = ["lcm_describe", "lcm_grep", "lcm_expand", "lcm_expand_query"]
SESSION_TOOL_NAMES = ["memory_search", "pin_fact", "send_turn"]
RECEIPT_TOOL_NAMES = ["lcm_receipt"]
HANDOFF_TOOL_NAMES = ["lcm_handoff"]
ERROR_KEYS = {"code", "message", "extra"}


@asynccontextmanager
async def http_session(url: str, headers: dict):
    """An SDK client session over Streamable HTTP, sending `headers` on every request."""
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        yield session


def _text(result) -> dict:
    assert len(result.content) == 1
    return json.loads(result.content[0].text)


async def _exercise(session: ClientSession, world: McpWorld) -> None:
    """List the tools, call each one, and check another user's ids are not found."""
    await session.initialize()
    listed = (await session.list_tools()).tools
    assert [t.name for t in listed] == (
        LCM_TOOL_NAMES + SESSION_TOOL_NAMES + RECEIPT_TOOL_NAMES + HANDOFF_TOOL_NAMES
    )
    by_name = {t.name: t for t in listed}
    for definition in TOOL_DEFINITIONS:
        tool = by_name[definition["name"]]
        assert tool.description == definition["description"]
        expected = {**definition["input_schema"]["properties"], "conversation_id": {}}
        assert set(tool.input_schema["properties"]) == set(expected)
        assert tool.input_schema["required"] == definition["input_schema"]["required"]

    top = world.dag.top[0].id
    described = await session.call_tool("lcm_describe", {"id": top})
    assert described.is_error is False
    assert _text(described)["id"] == top

    grep = await session.call_tool(
        "lcm_grep",
        {"query": "Message 3:", "mode": "regex", "conversation_id": world.conversation_id},
    )
    assert grep.is_error is False
    results = _text(grep)["results"]
    assert results[0]["covered_by"] == top
    assert {r["conversation_id"] for r in results} == {world.conversation_id}

    # Without conversation_id grep covers all of the caller's conversations, never others'.
    everywhere = _text(await session.call_tool("lcm_grep", {"query": "Message", "limit": 200}))
    assert {r["conversation_id"] for r in everywhere["results"]} == {world.conversation_id}

    expanded = await session.call_tool("lcm_expand", {"summary_id": top})
    assert expanded.is_error is False
    assert [s["id"] for s in _text(expanded)["summaries"]] == [leaf.id for leaf in world.dag.leaves]

    answered = await session.call_tool(
        "lcm_expand_query",
        {"prompt": "why?", "summary_ids": [top], "conversation_id": world.conversation_id},
    )
    assert answered.is_error is False
    body = _text(answered)
    assert body["mode"] == "offline" and top in body["cited_ids"]

    # Another user's ids are "not found", exactly like a missing id.
    theirs = world.other_dag.top[0].id
    for name, arguments in [
        ("lcm_describe", {"id": theirs}),
        ("lcm_expand", {"summary_id": theirs}),
        ("lcm_expand_query", {"prompt": "why?", "summary_ids": [theirs]}),
        ("lcm_grep", {"query": "Message", "conversation_id": world.other_conversation_id}),
        ("lcm_describe", {"id": "sum_ffffffffffffffff"}),
    ]:
        refused = await session.call_tool(name, arguments)
        assert refused.is_error is True, (name, refused)
        error = _text(refused)
        assert set(error) == ERROR_KEYS
        assert error["code"] == "not_found", (name, error)

    await _exercise_session_tools(session, world)

    # An unknown tool is a protocol error (invalid params), as the spec asks.
    with pytest.raises(MCPError) as raised:
        await session.call_tool("rm_rf", {})
    assert raised.value.code == INVALID_PARAMS
    assert raised.value.message == "unknown tool 'rm_rf'"

    # Bad input is an error result naming the field, not a protocol failure.
    bad = await session.call_tool("lcm_expand", {"summary_id": 7})
    assert bad.is_error is True
    assert _text(bad)["extra"] == {"field": "summary_id"}
    assert bad.content[0].text == (  # the bytes, as every wire carries them
        '{"code": "invalid", "message": "summary_id must be a non-empty string", '
        '"extra": {"field": "summary_id"}}'
    )


async def _exercise_session_tools(session: ClientSession, world: McpWorld) -> None:
    sent = await session.call_tool(
        "send_turn", {"session_id": world.session_id, "content": "Remember: the port is 8123."}
    )
    assert sent.is_error is False, sent
    turn = _text(sent)
    assert turn["session_id"] == world.session_id
    assert turn["turn_seq"] == 1
    assert turn["error"] is None
    assert "[offline provider]" in turn["answer"]

    pinned = await session.call_tool(
        "pin_fact", {"session_id": world.session_id, "text": "The port is 8123."}
    )
    assert pinned.is_error is False, pinned
    assert _text(pinned)["pinned"]["text"] == "The port is 8123."

    found = await session.call_tool(
        "memory_search", {"session_id": world.session_id, "query": "port"}
    )
    assert found.is_error is False, found

    # A session tool's bad input: the turn registry's schema check, as plain text.
    wrong = await session.call_tool(
        "memory_search", {"session_id": world.session_id, "query": "port", "top_k": 0}
    )
    assert wrong.is_error is True
    assert [c.text for c in wrong.content] == ["field 'top_k' must be at least 1"]

    for name, arguments in [
        ("send_turn", {"session_id": world.other_session_id, "content": "hi"}),
        ("pin_fact", {"session_id": world.other_session_id, "text": "mine now"}),
        ("memory_search", {"session_id": world.other_session_id, "query": "port"}),
        ("send_turn", {"session_id": "nope", "content": "hi"}),
    ]:
        refused = await session.call_tool(name, arguments)
        assert refused.is_error is True, (name, refused)
        assert _text(refused)["code"] == "not_found", (name, refused)


def _nothing_stored_for_the_other_user(world: McpWorld) -> None:
    assert not UserTurn.objects.filter(session_id=world.other_session_id).exists()
    states = StateCheckpoint.objects.filter(session_id=world.other_session_id)
    assert [(s.state_seq, s.pinned_facts) for s in states] == [(0, [])]


def test_stdio_transport_serves_the_tools_as_the_named_user(world):
    params = StdioServerParameters(
        command=sys.executable,
        args=["manage.py", "lcm_mcp", "--user", "owner"],
        env=child_env(),
        cwd=str(ROOT),
    )

    async def main():
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await _exercise(session, world)

    anyio.run(main)
    _nothing_stored_for_the_other_user(world)


def test_stdio_command_refuses_an_unknown_user(world):
    import subprocess

    done = subprocess.run(
        [sys.executable, "manage.py", "lcm_mcp", "--user", "nobody"],
        cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    assert "no active user named 'nobody'" in done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize("keyword", ["Bearer", "Token"])
def test_streamable_http_transport_serves_the_tools_as_the_token_owner(
    world, uvicorn_server, keyword
):
    async def main():
        headers = {"Authorization": f"{keyword} {world.owner_token}"}
        async with http_session(f"{uvicorn_server}/mcp/", headers) as session:
            await _exercise(session, world)

    anyio.run(main)
    _nothing_stored_for_the_other_user(world)


def test_streamable_http_sees_only_the_token_owners_data(world, uvicorn_server):
    """The other user's token: the owner's summary is not found, their own is."""

    async def main():
        headers = {"Authorization": f"Bearer {world.other_token}"}
        async with http_session(f"{uvicorn_server}/mcp", headers) as session:
            await session.initialize()
            mine = await session.call_tool("lcm_describe", {"id": world.dag.top[0].id})
            assert mine.is_error is True
            assert _text(mine)["code"] == "not_found"
            own = await session.call_tool("lcm_describe", {"id": world.other_dag.top[0].id})
            assert own.is_error is False

    anyio.run(main)


def test_streamable_http_refuses_missing_and_wrong_tokens(world, uvicorn_server):
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    accept = {"Accept": "application/json, text/event-stream"}
    with httpx2.Client(timeout=30) as http:
        missing = http.post(f"{uvicorn_server}/mcp/", json=initialize, headers=accept)
        wrong = http.post(
            f"{uvicorn_server}/mcp/",
            json=initialize,
            headers={**accept, "Authorization": "Bearer not-a-token"},
        )
        right = http.post(
            f"{uvicorn_server}/mcp/",
            json=initialize,
            headers={**accept, "Authorization": f"Bearer {world.owner_token}"},
        )
        foreign_host = http.post(
            f"{uvicorn_server}/mcp/",
            json=initialize,
            headers={
                **accept,
                "Authorization": f"Bearer {world.owner_token}",
                "Host": "evil.example",
            },
        )
        django = http.get(f"{uvicorn_server}/api/v1/tools/")
    assert missing.status_code == 401
    assert missing.json()["code"] == "not_authenticated"
    assert missing.headers["www-authenticate"] == "Bearer"
    assert wrong.status_code == 401
    assert wrong.json() == {
        "code": "authentication_failed",
        "message": "invalid token",
        "extra": {},
    }
    assert right.status_code == 200, right.text
    assert right.json()["result"]["serverInfo"]["name"] == "lcm"
    assert foreign_host.status_code == 400
    assert foreign_host.json()["code"] == "bad_host"
    # Everything else is still Django, in the same ASGI app.
    assert django.status_code == 401
    assert set(django.json()) == ERROR_KEYS
