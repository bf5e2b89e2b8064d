"""MCP over Streamable HTTP, mounted beside Django in the ASGI app (`lcmsite/asgi.py`).

`with_mcp(django_app)` routes `/mcp` and `/mcp/` here and everything else to Django.
Each request is authenticated with the API token (`Authorization: Token KEY` or
`Bearer KEY`) before the SDK sees it; the Host header is checked against
LCM_ALLOWED_HOSTS, as Django would. The SDK's session manager runs stateless with JSON
responses: every POST stands alone, so any worker process can answer it.

The session manager needs a long-lived task group. It is started by the ASGI lifespan
when the server sends one, and otherwise on the first MCP request, in a background
task of the server's event loop.
"""

from __future__ import annotations

import asyncio
import json

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http.request import split_domain_port, validate_host
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from mcpserver.auth import token_from_header, user_id_for_token
from mcpserver.server import build_server

MCP_PATHS = ("/mcp", "/mcp/")


def _header(scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


async def _error(send, status: int, code: str, message: str, headers=()) -> None:
    body = json.dumps({"code": code, "message": message, "extra": {}}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _user_id_from_request(ctx) -> int:
    # Set by McpHttpApp below before the request reached the SDK.
    return ctx.request.scope["lcm_user_id"]


class McpHttpApp:
    def __init__(self) -> None:
        self._manager = StreamableHTTPSessionManager(
            app=build_server(user_id_for=_user_id_from_request),
            json_response=True,
            stateless=True,
            max_request_body_size=settings.LCM_MAX_REQUEST_BYTES,
        )
        self._ready: asyncio.Event | None = None
        self._stopping: asyncio.Event | None = None
        self._task: asyncio.Task | None = None

    async def start(self) -> None:
        if self._ready is None:
            self._ready, self._stopping = asyncio.Event(), asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._serve())
        await self._ready.wait()

    async def _serve(self) -> None:
        async with self._manager.run():
            self._ready.set()
            await self._stopping.wait()

    async def stop(self) -> None:
        if self._task is not None:
            self._stopping.set()
            await self._task

    async def __call__(self, scope, receive, send) -> None:
        host, _port = split_domain_port(_header(scope, b"host") or "")
        if not validate_host(host, settings.ALLOWED_HOSTS):
            await _error(send, 400, "bad_host", "Host is not in LCM_ALLOWED_HOSTS")
            return
        key = token_from_header(_header(scope, b"authorization"))
        user_id = await sync_to_async(user_id_for_token)(key) if key else None
        if user_id is None:
            await _error(
                send,
                401,
                "authentication_failed" if key else "not_authenticated",
                "invalid token" if key else "send the API token: Authorization: Bearer KEY",
                headers=[(b"www-authenticate", b"Bearer")],
            )
            return
        await self.start()
        await self._manager.handle_request({**scope, "lcm_user_id": user_id}, receive, send)


def with_mcp(django_app):
    """The ASGI application: MCP at /mcp/, Django for everything else."""
    mcp_app = McpHttpApp()

    async def lifespan(scope, receive, send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await mcp_app.stop()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def application(scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            await lifespan(scope, receive, send)
        elif scope["type"] == "http" and scope["path"] in MCP_PATHS:
            await mcp_app(scope, receive, send)
        else:
            await django_app(scope, receive, send)

    application.mcp = mcp_app  # for tests and shutdown hooks
    return application
