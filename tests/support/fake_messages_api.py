"""A local HTTP server that speaks enough of the Anthropic Messages API for the real SDK.

    with FakeMessagesAPI() as api:
        api.enqueue(overloaded(), message("the summary"))
        client = anthropic.Anthropic(api_key="test", base_url=api.base_url, max_retries=0)
        ...
        assert len(api.requests) == 2
        assert api.requests[-1].body["model"] == "claude-test"

`POST /v1/messages` answers with the next scripted response: a `Scripted` (status, headers,
JSON body, optional delay before answering) or a callable that receives the request and
returns one (for tool loops that answer depending on what was sent). Every request is
recorded before it is answered, so a test can inspect a request even when it hung. With
the queue empty the server answers 500 with an `api_error` naming the problem. Like the
real API it answers 400 `invalid_request_error` to a body without `model`, `max_tokens` or
`messages`, and (API version 2026-10-21 and later) to `temperature`, `top_p` or `top_k`.

Shutting down wakes any scripted delay at once, and every connection is closed after one
response, so `__exit__` never waits on a hanging handler thread.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_ids = itertools.count(1)


@dataclass(frozen=True)
class Scripted:
    status: int = 200
    body: Any = None  # a JSON-serialisable object, or str/bytes sent as is
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds to wait before answering (a hang, when long)


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    raw: bytes

    @property
    def body(self) -> Any:
        return json.loads(self.raw) if self.raw else None


Responder = Scripted | Callable[[RecordedRequest], Scripted]


# Content blocks ----------------------------------------------------------------------------


def text_block(text: str) -> dict:
    return {"type": "text", "text": text, "citations": None}


def thinking_block(thinking: str, signature: str = "sig-fake") -> dict:
    return {"type": "thinking", "thinking": thinking, "signature": signature}


def redacted_thinking_block(data: str = "redacted-fake") -> dict:
    return {"type": "redacted_thinking", "data": data}


def tool_use_block(name: str, input: dict, id: str | None = None) -> dict:
    return {
        "type": "tool_use",
        "id": id or f"toolu_fake{next(_ids):04d}",
        "name": name,
        "input": input,
    }


# Responses ---------------------------------------------------------------------------------


def message(
    text: str | None = None,
    *,
    content: list[dict] | None = None,
    model: str = "claude-fake-1",
    stop_reason: str | None = None,
    input_tokens: int = 100,
    output_tokens: int = 20,
    delay: float = 0.0,
) -> Scripted:
    """A 200 message; `text` is shorthand for one text block."""
    blocks = content if content is not None else ([text_block(text)] if text is not None else [])
    if stop_reason is None:
        stop_reason = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    body = {
        "id": f"msg_fake{next(_ids):06d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }
    return Scripted(200, body, delay=delay)


def error(
    status: int, error_type: str, text: str, headers: dict[str, str] | None = None
) -> Scripted:
    body = {"type": "error", "error": {"type": error_type, "message": text}}
    return Scripted(status, body, dict(headers or {}))


def authentication_error() -> Scripted:
    return error(401, "authentication_error", "invalid x-api-key")


def permission_error() -> Scripted:
    return error(
        403, "permission_error", "your API key does not have permission to use this resource"
    )


def overloaded() -> Scripted:
    return error(529, "overloaded_error", "Overloaded")


def rate_limited(retry_after: float | None = None) -> Scripted:
    headers = {} if retry_after is None else {"retry-after": f"{retry_after:g}"}
    return error(
        429, "rate_limit_error", "Number of requests has exceeded your rate limit", headers
    )


def server_error(status: int = 500) -> Scripted:
    return error(status, "api_error", "Internal server error")


def hang(seconds: float = 60.0) -> Scripted:
    """Answer only after `seconds` (or when the server shuts down): a stuck upstream."""
    return message("(answered after a hang)", delay=seconds)


# The server --------------------------------------------------------------------------------


class FakeMessagesAPI:
    """The fake API on 127.0.0.1 with an ephemeral port, served from a background thread."""

    def __init__(self) -> None:
        self._queue: deque[Responder] = deque()
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # Scripting and inspection

    def enqueue(self, *responses: Responder) -> FakeMessagesAPI:
        with self._lock:
            self._queue.extend(responses)
        return self

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def pending(self) -> int:
        """Scripted responses not served yet."""
        with self._lock:
            return len(self._queue)

    @property
    def base_url(self) -> str:
        assert self._server is not None, "the fake API is not running"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    # Lifecycle

    def start(self) -> FakeMessagesAPI:
        self._stopping.clear()
        self._server = _Server(("127.0.0.1", 0), _handler_for(self))
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._stopping.set()  # wakes scripted delays
        self._server.shutdown()
        self._server.server_close()  # joins the handler threads
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server, self._thread = None, None

    def __enter__(self) -> FakeMessagesAPI:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # Called from handler threads

    def _record_and_pick(self, request: RecordedRequest) -> Scripted:
        with self._lock:
            self._requests.append(request)
            problem = _invalid(request)
            if problem:  # refused like the real API, without using up a scripted response
                return error(400, "invalid_request_error", problem)
            responder = self._queue.popleft() if self._queue else None
        if responder is None:
            return error(500, "api_error", "fake Messages API: no scripted response left")
        return responder(request) if callable(responder) else responder

    def _wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`; False when the server is shutting down."""
        return not self._stopping.wait(seconds)


# API version 2026-10-21 (sent by the SDK 2.x) refuses sampling parameters outright.
SAMPLING_REMOVED_IN = "2026-10-21"
_SAMPLING = ("temperature", "top_p", "top_k")


def _invalid(request: RecordedRequest) -> str | None:
    """What the real API would refuse with a 400, for the checks worth having in tests."""
    try:
        body = request.body
    except ValueError:
        return "request body is not valid JSON"
    if not isinstance(body, dict):
        return "request body must be a JSON object"
    for name in ("model", "max_tokens", "messages"):
        if name not in body:
            return f"{name}: Field required"
    if request.headers.get("anthropic-version", "") >= SAMPLING_REMOVED_IN:
        for name in _SAMPLING:
            if name in body:
                return f"{name}: Extra inputs are not permitted"
    return None


class _Server(ThreadingHTTPServer):
    daemon_threads = False
    block_on_close = True  # server_close() joins handler threads
    allow_reuse_address = True


def _handler_for(api: FakeMessagesAPI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 10  # a client that connects and never sends cannot pin a thread

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            request = RecordedRequest(
                "POST", self.path, {k.lower(): v for k, v in self.headers.items()}, raw
            )
            if self.path.split("?")[0] != "/v1/messages":  # not recorded, not scripted
                self._send(error(404, "not_found_error", f"no route {self.path}"))
                return
            scripted = api._record_and_pick(request)
            if scripted.delay and not api._wait(scripted.delay):
                self.close_connection = True
                return  # shutting down: drop the connection unanswered
            self._send(scripted)

        def _send(self, scripted: Scripted) -> None:
            body = scripted.body
            if isinstance(body, bytes):
                payload = body
            elif isinstance(body, str):
                payload = body.encode()
            else:
                payload = json.dumps(body).encode()
            try:
                self.send_response(scripted.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.send_header("request-id", f"req_fake{next(_ids):06d}")
                self.send_header("connection", "close")
                for name, value in scripted.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test); nothing to tell it
            self.close_connection = True

        def log_message(self, format: str, *args: object) -> None:
            pass  # quiet test output

    return Handler
