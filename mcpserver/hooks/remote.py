"""The few HTTP calls a hook makes to a server elsewhere (`--server URL --token KEY`),
with the standard library: the hook runs inside the agent and must start fast."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

TIMEOUT_SECONDS = 20


class RemoteError(Exception):
    """The server could not be reached or answered with an error."""


@dataclass(frozen=True)
class Remote:
    base_url: str
    token: str

    def _send(self, method: str, path: str, body: bytes | None = None, content_type=None):
        request = urllib.request.Request(self.base_url.rstrip("/") + path, data=body, method=method)
        request.add_header("Authorization", f"Token {self.token}")
        request.add_header("Accept", "application/json")
        if content_type:
            request.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            detail = error.read().decode(errors="replace")[:300]
            raise RemoteError(f"{method} {path}: HTTP {error.code}: {detail}") from None
        except (urllib.error.URLError, OSError, ValueError) as error:
            raise RemoteError(f"{method} {path}: {error}") from None

    def get(self, path: str):
        return self._send("GET", path)

    def upload(self, path: str, fields: dict[str, str], file: Path):
        """POST multipart/form-data: `fields` and the file as `file`."""
        boundary = uuid.uuid4().hex
        lines: list[bytes] = []
        for name, value in fields.items():
            lines += [
                f"--{boundary}".encode(),
                f'Content-Disposition: form-data; name="{name}"'.encode(),
                b"",
                value.encode(),
            ]
        lines += [
            f"--{boundary}".encode(),
            f'Content-Disposition: form-data; name="file"; filename="{file.name}"'.encode(),
            b"Content-Type: application/octet-stream",
            b"",
            file.read_bytes(),
            f"--{boundary}--".encode(),
            b"",
        ]
        body = b"\r\n".join(lines)
        return self._send("POST", path, body, f"multipart/form-data; boundary={boundary}")
