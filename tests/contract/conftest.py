"""A real server for the contract tests: `manage.py lcm_serve` on a free port with its own
database (SQLite, or on a PostgreSQL run a fresh PostgreSQL database) and data directory
(migrated at start), a staff user and its API token.

It is independent of the test database, so the checks run against committed data through
the real HTTP stack, once per session."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class ContractServer:
    url: str
    token: str
    data_dir: Path

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Token {self.token}"}


def _postgres_database() -> str | None:
    """On a PostgreSQL run, the server the contract server gets a fresh database on (beside
    the test database): in CI the contract runs in the PostgreSQL process tests' run."""
    url = os.environ.get("LCM_DATABASE_URL") or os.environ.get("DATABASE_URL") or ""
    if not url.startswith(("postgres://", "postgresql://")):
        return None
    return url


def _env(data_dir: str, database_url: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    for name in ("LCM_DATABASE_URL", "DATABASE_URL", "LCM_DEBUG", "LCM_REDIS_URL"):
        env.pop(name, None)
    if database_url:
        env["LCM_DATABASE_URL"] = database_url
    env.update(
        LCM_DATA_DIR=data_dir,
        DJANGO_SETTINGS_MODULE="lcmsite.settings",
        PYTHONUNBUFFERED="1",
        # Generated requests come fast and many are unauthenticated on purpose.
        LCM_THROTTLE_USER_RATE="",
        LCM_THROTTLE_IP_RATE="",
        LCM_AUTH_FAILURE_RATE="",
    )
    return env


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def contract_server():
    import httpx

    data_dir = tempfile.mkdtemp(prefix="lcm-contract-")
    server_url = _postgres_database()
    database = None
    if server_url:
        import psycopg

        database = f"lcm_contract_{os.getpid()}"
        # through the server's maintenance database: the URL's own may not exist (the
        # process tests' run names a database pytest-django creates as test_<name>)
        with psycopg.connect(server_url, dbname="postgres", autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {database}")
            admin.execute(f"CREATE DATABASE {database}")
        server_url = server_url.rsplit("/", 1)[0] + "/" + database
    env = _env(data_dir, server_url)
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    created = subprocess.run(
        [*manage, "lcm_create_user", "contract", "--staff"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    token = created.stdout.strip().rsplit("token: ", 1)[1].strip()
    port = _free_port()
    log = open(Path(data_dir) / "server.log", "ab")  # noqa: SIM115
    process = subprocess.Popen(
        [*manage, "lcm_serve", "--no-worker", "--no-demo", "--no-migrate", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None:
            raise RuntimeError((Path(data_dir) / "server.log").read_text()[-3000:])
        try:
            httpx.get(url + "/api/v1/schema/", timeout=2)
            break
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    try:
        yield ContractServer(url=url, token=token, data_dir=Path(data_dir))
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
        if database:
            import psycopg

            with psycopg.connect(_postgres_database(), dbname="postgres", autocommit=True) as admin:
                admin.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
