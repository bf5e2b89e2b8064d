"""Deliver to a remote server (`lcm_watch --server URL --token T`).

What leaves the machine: the bytes of the watched session files (new lines of an
append-only file, the whole of a file rewritten whole, a consistent copy of OpenCode's
database), sent over HTTP(S) with the user's token to `POST /api/v1/imports/watch/`,
and nothing else (docs/capture.md, "Privacy"). The offsets advance only after the
server acknowledged the import; a server that is down or answers 5xx is retried with
backoff, so nothing is lost and, the import being idempotent, nothing doubles.
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from importers.watch.changes import read_region
from importers.watch.local import Delivery, Retry

CHUNK = 4 * 1024 * 1024  # bytes per request, well under LCM_MAX_REQUEST_BYTES
MAX_BACKOFF = 60.0


class RemoteError(Exception):
    """The server refused the request for good (4xx other than 409/429): not retried."""


class RemoteSink:
    def __init__(self, server: str, token: str, *, log=None, first_backoff: float = 0.5):
        self.url = server.rstrip("/") + "/api/v1/imports/watch/"
        self.token = token
        self.target = server.rstrip("/")
        self.log = log or (lambda text: None)
        self.first_backoff = first_backoff

    # -- HTTP ----------------------------------------------------------------------

    def _post_once(self, params: dict, data: bytes) -> tuple[int, dict]:
        request = urllib.request.Request(
            f"{self.url}?{urllib.parse.urlencode(params)}",
            data=data,
            method="POST",
            headers={
                "Authorization": f"Token {self.token}",
                "Content-Type": "application/octet-stream",
                "Accept": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=300) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            body = error.read()
            try:
                return error.code, json.loads(body or b"{}")
            except ValueError:
                return error.code, {"message": body[:200].decode("utf-8", "replace")}

    def post(self, params: dict, data: bytes = b"") -> dict:
        """POST until the server answers; 2xx and 409 are answers, 4xx a RemoteError."""
        delay = self.first_backoff
        while True:
            try:
                status, body = self._post_once(params, data)
            except (urllib.error.URLError, OSError) as error:
                status, body = None, {"message": str(getattr(error, "reason", error))}
            answered = status == 409 and body.get("code") in ("offset_ahead", "not_readable")
            if status is not None and (status < 300 or answered):
                return dict(body, status=status)
            if status is not None and 400 <= status < 500 and status not in (408, 409, 429):
                raise RemoteError(f"{status} {body.get('code', '')}: {body.get('message', '')}")
            self.log(f"server not reachable ({status or body['message']}); retry in {delay:.1f}s")
            time.sleep(delay)
            delay = min(delay * 2, MAX_BACKOFF)

    # -- sending files -------------------------------------------------------------

    def _send(self, relative: str, data: bytes, offset: int, replace: bool, path: Path) -> None:
        end = offset + len(data)
        first = True
        while True:
            piece = data[:CHUNK]
            mode = "replace" if replace and first else "append"
            answer = self.post({"path": relative, "mode": mode, "offset": offset}, piece)
            if answer["status"] == 409:  # the mirror is behind (it lost a piece): from there
                offset = int(answer["extra"]["size"])
                data, first, replace = read_region(path, offset, end), False, False
                continue
            first, data, offset = False, data[CHUNK:], offset + len(piece)
            if not data:
                return

    def send_change(self, change) -> None:
        watched = change.watched
        relative = watched.relative()
        if change.kind == "deleted":
            self.post({"path": relative, "mode": "delete"})
        elif change.kind == "rewritten":
            self._send(relative, _whole_bytes(watched.path), 0, True, watched.path)
        elif change.end > change.start or change.kind == "reset":
            data = read_region(watched.path, change.start, change.end)
            self._send(relative, data, change.start, change.kind == "reset", watched.path)

    def deliver(self, unit: Path, format: str, changes: list, complete_lines: int | None):
        watched = changes[0].watched
        if unit.suffix == ".db":  # OpenCode's database: one consistent copy, never its WAL
            if unit.exists():
                self._send(watched.relative(unit), _whole_bytes(unit), 0, True, unit)
        else:
            for change in changes:
                self.send_change(change)
        delivery = Delivery()
        if not unit.exists():
            return delivery
        answer = self.post({"path": watched.relative(unit), "mode": "import"})
        if answer["status"] == 409:  # the copy sent was caught mid-save: next pass
            raise Retry(answer.get("message", "not readable"))
        imported = answer.get("imported", {})
        delivery.messages = imported.get("messages", 0)
        delivery.conversations = imported.get("conversations", 0)
        for error in answer.get("errors", []):
            line = error.get("line")
            if complete_lines is not None and isinstance(line, int) and line > complete_lines:
                continue
            delivery.errors.append(f"line {line}: {error.get('message')}")
        delivery.errors += [f"{p['code']}: {p['message']}" for p in answer.get("problems", [])]
        return delivery


def _whole_bytes(path: Path) -> bytes:
    """The file's bytes; for a SQLite database (OpenCode's, in WAL mode) a consistent copy
    made with SQLite's backup, so what is in its write-ahead log is included."""
    if path.suffix != ".db":
        return path.read_bytes()
    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder) / "copy.db"
        source = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        target = sqlite3.connect(copy)
        try:
            source.backup(target)
        finally:
            target.close()
            source.close()
        return copy.read_bytes()
