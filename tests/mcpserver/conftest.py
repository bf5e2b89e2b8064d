"""Fixtures for the MCP tests: committed data (the server runs in another process) and
the environment that points a child process at this test database."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from tests.factories import ConversationFactory, UserFactory, append_messages
from tests.retrieval.dag_builder import BuiltDag, build_dag
from tests.support.tokens import issue_token
from turns.services import session_create


@pytest.fixture(autouse=True)
def _hook_spool(tmp_path, monkeypatch):
    """The hook client's spool and answer cache in the test's folder, never the user's."""
    monkeypatch.setenv("LCM_HOOK_SPOOL", str(tmp_path / "hook-spool"))


ROOT = Path(__file__).resolve().parents[2]


@dataclass
class McpWorld:
    owner_token: str
    other_token: str
    conversation_id: int
    dag: BuiltDag
    other_conversation_id: int
    other_dag: BuiltDag
    session_id: str
    other_session_id: str


@pytest.fixture
def world(transactional_db) -> McpWorld:
    owner = UserFactory(username="owner")
    other = UserFactory(username="other")
    conversation = ConversationFactory(owner=owner)
    append_messages(conversation, 48)
    dag = build_dag(conversation, leaf_size=10, fanout=4, max_depth=1, tail=8)
    theirs = ConversationFactory(owner=other)
    append_messages(theirs, 24)
    other_dag = build_dag(theirs, leaf_size=8, fanout=4, max_depth=1, tail=4)
    return McpWorld(
        session_id=session_create(owner=owner, title="mcp").pk,
        other_session_id=session_create(owner=other, title="theirs").pk,
        owner_token=issue_token(owner),
        other_token=issue_token(other),
        conversation_id=conversation.pk,
        dag=dag,
        other_conversation_id=theirs.pk,
        other_dag=other_dag,
    )


def child_env() -> dict[str, str]:
    """This process's environment, pointed at the test database (already committed to)."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        url = f"sqlite:///{db['NAME']}"
    else:
        url = f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    # No provider keys: turns use the offline provider, expansions run offline.
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "LCM_CONFIG_FILE")
    }
    env.update(
        LCM_DATABASE_URL=url,
        LCM_DATA_DIR=str(settings.DATA_DIR),
        DJANGO_SETTINGS_MODULE="lcmsite.settings",
        PYTHONUNBUFFERED="1",
    )
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def uvicorn_server(world):
    """The real ASGI app (lcmsite.asgi) under uvicorn in a child process; yields its URL."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "lcmsite.asgi:application", "--port", str(port),
         "--host", "127.0.0.1", "--log-level", "warning"],
        cwd=ROOT, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    output = process.stdout.read().decode() if process.stdout else ""
                    raise RuntimeError(f"uvicorn did not start:\n{output}") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)
