"""The machinery under the fake provider APIs (fake_messages_api, fake_responses_api): a
threaded HTTP/1.1 server on 127.0.0.1 answering one route with scripted responses.

A `Scripted` response is either JSON (status, headers, body) or, when `events` is set, a
server-sent event stream sent with chunked transfer encoding, one chunk per event, exactly
as `event: <name>\\ndata: <json>\\n\\n`. `chunk_delay` pauses before each event (slow
streams); `drop_after=N` closes the socket abruptly after N events without the closing
chunk (a dropped connection, which the client sees as an incomplete body). `delay` waits
before answering at all (a hang). Every delay wakes at once when the server stops.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import socket
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_ids = itertools.count(1)


def next_id() -> int:
    return next(_ids)


@dataclass(frozen=True)
class SSE:
    event: str | None  # None sends a data-only event
    data: Any  # JSON-serialisable, or a str sent as is

    def encode(self) -> bytes:
        data = self.data if isinstance(self.data, str) else json.dumps(self.data)
        head = f"event: {self.event}\n" if self.event is not None else ""
        lines = "".join(f"data: {line}\n" for line in data.split("\n"))
        return (head + lines + "\n").encode()


@dataclass(frozen=True)
class Scripted:
    status: int = 200
    body: Any = None  # a JSON-serialisable object, or str/bytes sent as is
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds to wait before answering (a hang, when long)
    events: tuple[SSE, ...] | None = None  # an SSE stream instead of a body
    chunk_delay: float = 0.0  # seconds before each event of a stream
    drop_after: int | None = None  # close the socket after this many events

    def slowly(self, chunk_delay: float) -> Scripted:
        return dataclasses.replace(self, chunk_delay=chunk_delay)

    def dropped_after(self, events: int) -> Scripted:
        return dataclasses.replace(self, drop_after=events)


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


class FakeAPI:
    """Subclasses set `route`, `url_suffix`, and implement `invalid(request)` and
    `error_response(status, kind, text)`."""

    route = "/"
    url_suffix = ""  # appended to base_url (the OpenAI SDK wants ".../v1")
    name = "fake API"

    def __init__(self) -> None:
        self._queue: deque[Responder] = deque()
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # Scripting and inspection

    def enqueue(self, *responses: Responder):
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
        assert self._server is not None, f"the {self.name} is not running"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}{self.url_suffix}"

    # Lifecycle

    def start(self):
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

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # For subclasses

    def invalid(self, request: RecordedRequest) -> Scripted | None:
        return None

    def error_response(self, status: int, kind: str, text: str) -> Scripted:
        return Scripted(status, {"error": {"type": kind, "message": text}})

    # Called from handler threads

    def _record_and_pick(self, request: RecordedRequest) -> Scripted:
        with self._lock:
            self._requests.append(request)
            refused = self.invalid(request)
            if refused is not None:  # refused like the real API, keeping the script
                return refused
            responder = self._queue.popleft() if self._queue else None
        if responder is None:
            return self.error_response(500, "api_error", f"{self.name}: no scripted response left")
        return self.answer(request, responder(request) if callable(responder) else responder)

    def answer(self, request: RecordedRequest, scripted: Scripted) -> Scripted:
        """The response actually sent (a subclass may fill in figures from the request)."""
        return scripted

    def _wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`; False when the server is shutting down."""
        return not self._stopping.wait(seconds)


class _Server(ThreadingHTTPServer):
    daemon_threads = False
    block_on_close = True  # server_close() joins handler threads
    allow_reuse_address = True


def _handler_for(api: FakeAPI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 10  # a client that connects and never sends cannot pin a thread

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            request = RecordedRequest(
                "POST", self.path, {k.lower(): v for k, v in self.headers.items()}, raw
            )
            if self.path.split("?")[0] != api.route:  # not recorded, not scripted
                self._send(api.error_response(404, "not_found_error", f"no route {self.path}"))
                return
            scripted = api._record_and_pick(request)
            if scripted.delay and not api._wait(scripted.delay):
                self.close_connection = True
                return  # shutting down: drop the connection unanswered
            if scripted.events is not None:
                self._stream(scripted)
            else:
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
                self.send_header("request-id", f"req_fake{next_id():06d}")
                self.send_header("connection", "close")
                for name, value in scripted.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test); nothing to tell it
            self.close_connection = True

        def _stream(self, scripted: Scripted) -> None:
            self.close_connection = True
            try:
                self.send_response(scripted.status)
                self.send_header("content-type", "text/event-stream; charset=utf-8")
                self.send_header("cache-control", "no-cache")
                self.send_header("transfer-encoding", "chunked")
                self.send_header("request-id", f"req_fake{next_id():06d}")
                self.send_header("connection", "close")
                for name, value in scripted.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.flush()
                for count, event in enumerate(scripted.events or ()):
                    if scripted.drop_after is not None and count >= scripted.drop_after:
                        self._drop()
                        return
                    if scripted.chunk_delay and not api._wait(scripted.chunk_delay):
                        self._drop()
                        return
                    data = event.encode()
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    self.wfile.flush()
                if scripted.drop_after is not None:
                    self._drop()
                    return
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client went away mid-stream

        def _drop(self) -> None:
            """Close the socket at once, without the closing chunk."""
            try:
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

        def log_message(self, format: str, *args: object) -> None:
            pass  # quiet test output

    return Handler
