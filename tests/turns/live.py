"""A real server for the streaming tests: `manage.py lcm_serve` (uvicorn, ASGI) in a child
process pointed at this test database, and a small SSE reader over httpx."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx2 as httpx  # the SDKs depend on it (the httpx API, renamed)
from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment, pointed at the test database (committed data only)."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        url = f"sqlite:///{db['NAME']}"
    else:
        host = db["HOST"] or "127.0.0.1"
        url = f"postgres://{db['USER']}@{host}:{db['PORT'] or 5432}/{db['NAME']}"
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "LCM_DEBUG"}
    env.update(
        LCM_DATABASE_URL=url,
        LCM_DATA_DIR=str(settings.DATA_DIR),
        DJANGO_SETTINGS_MODULE="lcmsite.settings",
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveServer:
    """`lcm_serve --no-worker --no-demo --no-migrate` on a free port."""

    def __init__(self, **env: str) -> None:
        self.port = free_port()
        self.env = child_env(**env)
        self.process: subprocess.Popen | None = None
        self.log = Path(settings.DATA_DIR) / f"server-{self.port}.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> LiveServer:
        command = [
            sys.executable,
            str(ROOT / "manage.py"),
            "lcm_serve",
            "--no-worker",
            "--no-demo",
            "--no-migrate",
            "--port",
            str(self.port),
        ]
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(
                command, cwd=ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited: {self.log.read_text()[-3000:]}")
            try:
                httpx.get(self.url + "/api/v1/models/", timeout=1)
                return self
            except httpx.HTTPError:
                time.sleep(0.1)
        self.process.kill()  # never left behind by a failed test
        self.process.wait()
        raise RuntimeError(f"server did not come up: {self.log.read_text()[-3000:]}")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def terminate(self, timeout: float = 15.0) -> float:
        """SIGTERM; returns the seconds it took to exit."""
        started = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout)
        return time.monotonic() - started

    def __enter__(self) -> LiveServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.kill()


@dataclass
class SSE:
    id: int | None
    event: str
    data: dict


def parse_sse(lines) -> iter:
    """Events from an iterator of text lines (comments and `retry:` skipped)."""
    fields: dict[str, str] = {}
    for line in lines:
        if line == "":
            if "event" in fields or "data" in fields:
                yield SSE(
                    int(fields["id"]) if "id" in fields else None,
                    fields.get("event", "message"),
                    json.loads(fields.get("data", "null")),
                )
            fields = {}
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        fields[name] = value[1:] if value.startswith(" ") else value


def stream_events(client: httpx.Client, method: str, url: str, **kwargs):
    """Yield (response, SSE) pairs while the server streams."""
    with client.stream(method, url, **kwargs) as response:
        if response.status_code >= 400:
            response.read()
            raise AssertionError(f"{response.status_code}: {response.text}")
        yield from ((response, event) for event in parse_sse(response.iter_lines()))
