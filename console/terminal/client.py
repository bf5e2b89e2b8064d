"""The terminal client's HTTP side: JSON requests and event streams to one server with one
token, over `http.client` (standard library only)."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from urllib.parse import quote, urlsplit

from console.terminal.sse import SseEvent, parse_sse


def rows(data) -> list:
    """The list an answer carries: itself, or its `results` (`items`, `models`, ...)."""
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        for key in ("results", "items", "models", "hits", "branches", "turns"):
            if isinstance(data.get(key), list):
                return data[key]
    return []


def segment(value: str) -> str:
    """`value` as one path segment of a URL."""
    return quote(str(value), safe="")


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, extra: dict | None = None):
        super().__init__(f"{code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.extra = extra or {}


class ApiClient:
    """JSON and event-stream requests to one server with one token."""

    def __init__(self, base_url: str, token: str, *, timeout: float = 60.0) -> None:
        parts = urlsplit(base_url.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"--url must be an http(s) URL, got {base_url!r}")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port
        self.prefix = parts.path.rstrip("/") + "/api/v1/"
        self.token = token
        self.timeout = timeout

    def relative(self, url: str) -> str:
        """A `next` link of a paged answer as a path under /api/v1/."""
        parts = urlsplit(url)
        path = parts.path[len(self.prefix) :] if parts.path.startswith(self.prefix) else parts.path
        return path + (f"?{parts.query}" if parts.query else "")

    def _connection(self) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
        return cls(self.host, self.port, timeout=self.timeout)

    def _headers(self, accept: str) -> dict:
        return {
            "Authorization": f"Token {self.token}",
            "Accept": accept,
            "Content-Type": "application/json",
        }

    def request(self, method: str, path: str, body: dict | None = None):
        conn = self._connection()
        try:
            payload = None if body is None else json.dumps(body).encode()
            conn.request(method, self.prefix + path, payload, self._headers("application/json"))
            response = conn.getresponse()
            raw = response.read()
        finally:
            conn.close()
        data = json.loads(raw) if raw else None
        if response.status >= 400:
            data = data if isinstance(data, dict) else {}
            raise ApiError(
                response.status,
                data.get("code", f"http_{response.status}"),
                data.get("message", response.reason),
                data.get("extra"),
            )
        return data

    def stream(
        self, method: str, path: str, body: dict | None = None, *, last_event_id: int = 0
    ) -> Iterator[SseEvent]:
        """The events of one connection, until it closes (a drop simply ends the iterator)."""
        conn = self._connection()
        headers = self._headers("text/event-stream")
        if last_event_id:
            headers["Last-Event-ID"] = str(last_event_id)
        try:
            payload = None if body is None else json.dumps(body).encode()
            conn.request(method, self.prefix + path, payload, headers)
            response = conn.getresponse()
            if response.status >= 400:
                raw = response.read()
                data = json.loads(raw) if raw else {}
                raise ApiError(
                    response.status,
                    data.get("code", f"http_{response.status}"),
                    data.get("message", response.reason),
                    data.get("extra"),
                )
            yield from parse_sse(response)
        except (OSError, http.client.HTTPException):
            return  # a dropped connection: the caller resumes
        finally:
            conn.close()
