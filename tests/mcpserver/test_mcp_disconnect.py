"""A client that goes away is an ordinary disconnect (one INFO line, no traceback), and
`/mcp/` outside `lcm_serve` (Django's WSGI stack, as under `runserver`) is a clear 404
that names lcm_serve."""

from __future__ import annotations

import socket
import time

import anyio
import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.factories import UserFactory
from tests.support.tokens import issue_token
from tests.turns.live import LiveServer


def _cut_mid_request(port: int, key: str) -> None:
    """POST /mcp/ promising 1,000 bytes, send 20, and close the connection."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(
            (
                f"POST /mcp/ HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n"
                "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
                'Content-Length: 1000\r\n\r\n{"jsonrpc": "2.0",'
            ).encode()
        )
        time.sleep(0.3)


async def _a_whole_session(url: str, key: str) -> int:
    async with (
        httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}) as http,
        streamable_http_client(url, http_client=http) as (read, write, *_),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return len((await session.list_tools()).tools)


@pytest.mark.process(portable=True)
@pytest.mark.django_db(transaction=True)
def test_a_client_that_goes_away_is_logged_as_a_disconnect_not_an_error():
    key = issue_token(UserFactory(username="mcp-client"))
    with LiveServer(LCM_LOG_LEVEL="INFO") as server:
        assert anyio.run(_a_whole_session, f"{server.url}/mcp/", key) > 0
        _cut_mid_request(server.port, key)
        deadline = time.monotonic() + 10
        while "MCP client disconnected" not in server.log.read_text():
            assert time.monotonic() < deadline, server.log.read_text()[-2000:]
            time.sleep(0.1)
        # The server is fine afterwards.
        assert anyio.run(_a_whole_session, f"{server.url}/mcp", key) > 0
    log = server.log.read_text()
    assert "Traceback" not in log
    assert "ClientDisconnect" not in log
    assert "Error handling POST request" not in log
    assert log.count("MCP client disconnected before its request was complete") == 1


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/mcp/", "/mcp"])
def test_mcp_outside_lcm_serve_is_a_404_that_names_lcm_serve(client, path):
    for response in (client.get(path), client.post(path, "{}", content_type="application/json")):
        assert response.status_code == 404
        body = response.json()
        assert body["code"] == "mcp_not_served_here"
        assert "manage.py lcm_serve" in body["message"]
        assert body["extra"] == {"serve_with": "manage.py lcm_serve"}
