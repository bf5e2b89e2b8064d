"""MCP over Streamable HTTP, mounted beside Django in the ASGI app (`lcmsite/asgi.py`).

`with_mcp(django_app)` routes `/mcp` and `/mcp/` here and everything else to Django.
Each request is authenticated with the API token (`Authorization: Token KEY` or
`Bearer KEY`) before the SDK sees it; the Host header is checked against
LCM_ALLOWED_HOSTS, as Django would. The SDK's session manager runs stateless with JSON
responses: every POST stands alone, so any worker process can answer it.

The session manager needs a long-lived task group. It is started by the ASGI lifespan
when the server sends one, and otherwise on the first MCP request, in a background
task of the server's event loop.

A client that goes away (closes its session, is cancelled, loses the network) is an
ordinary disconnect: the request body is read here first, so a disconnect before it is
complete ends the request with one INFO line on the `lcm.mcp` logger, and the SDK's
"Error handling POST request" traceback for a `ClientDisconnect` is logged the same way.

The endpoint exists only under the ASGI server (`manage.py lcm_serve`); under
`manage.py runserver` (WSGI) `/mcp/` answers a 404 that says so (lcmsite/urls.py).
"""

from __future__ import annotations

import asyncio
import json
import logging

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http.request import split_domain_port, validate_host
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from mcpserver.auth import token_from_header, user_id_for_token
from mcpserver.server import build_server

MCP_PATHS = ("/mcp", "/mcp/")
logger = logging.getLogger("lcm.mcp")


class _DisconnectIsNotAnError(logging.Filter):
    """The SDK logs any exception of a POST with its traceback; a client that closed the
    connection (starlette's `ClientDisconnect`) is not an error: one INFO line instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None and type(exc).__name__ == "ClientDisconnect":
            record.exc_info = None
            record.exc_text = None
            record.levelno, record.levelname = logging.INFO, "INFO"
            record.msg, record.args = "MCP client disconnected (%s)", (record.getMessage(),)
        return True


logging.getLogger("mcp.server.streamable_http").addFilter(_DisconnectIsNotAnError())


class _TooLarge(Exception):
    pass


async def _read_body(receive, limit: int) -> bytes | None:
    """The whole request body, or None when the client disconnected first; `_TooLarge`
    past `limit` bytes (what the SDK would refuse too)."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _TooLarge
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


def _replay(body: bytes, receive):
    """A `receive` that gives the SDK the body already read, then the real channel."""
    given = False

    async def replay():
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


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
        if scope.get("method") == "POST":
            try:
                body = await _read_body(receive, settings.LCM_MAX_REQUEST_BYTES)
            except _TooLarge:
                await _error(
                    send, 413, "payload_too_large", "request body over LCM_MAX_REQUEST_BYTES"
                )
                return
            if body is None:
                logger.info("MCP client disconnected before its request was complete")
                return
            receive = _replay(body, receive)
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
