"""Real worker and server processes for the crash, shutdown and load tests, and the one
final-state check they all share."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

from django.db.models import Count

from compaction.models import CompactionJob, CompactionRun
from conversations.models import Conversation, Message
from integrity.models import ScanMode, Trigger
from integrity.services import integrity_scan
from tests.turns.live import ROOT, child_env

# Small chunks, so a few hundred messages make many short passes.
SMALL_CHUNKS = {
    "LCM_LEAF_CHUNK_TOKENS": "400",
    "LCM_LEAF_TARGET_TOKENS": "120",
    "LCM_CONDENSED_TARGET_TOKENS": "160",
    "LCM_LEAF_MIN_FANOUT": "4",
    "LCM_CONDENSED_MIN_FANOUT": "3",
}


def worker_env(fake_api=None, **extra: str) -> dict[str, str]:
    """A worker pointed at the test database; with `fake_api`, the Anthropic summarizer
    talks to that fake Messages API (so each pass takes as long as its scripted delay)."""
    env = dict(SMALL_CHUNKS, LCM_WORKERS="1", LCM_AUTOCOMPACT_DISABLED="1")
    if fake_api is not None:
        env.update(ANTHROPIC_API_KEY="sk-ant-test-jobs", ANTHROPIC_BASE_URL=fake_api.base_url)
    env.update(extra)
    return child_env(**env)


def start_worker(env: dict) -> subprocess.Popen:
    """`manage.py qcluster` in its own process group (so a kill can take the workers too)."""
    return subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "qcluster"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def kill_group(process: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(10)


def group_alive(process: subprocess.Popen) -> bool:
    try:
        os.killpg(process.pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_for(condition, timeout: float, step: float = 0.05) -> float:
    """Seconds until `condition()` held; raises after `timeout`."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(step)
    return time.monotonic() - started


def jobs_terminal() -> bool:
    return not CompactionJob.objects.filter(state__in=["pending", "running"]).exists()


def assert_consistent(expected_messages: dict[int, int]) -> None:
    """0 lost or duplicated messages (per conversation: exactly the expected count, seqs
    1..n with no gap), integrity clean (which covers lineage and the context), every
    compaction job and run terminal."""
    for conversation_id, count in expected_messages.items():
        seqs = list(
            Message.objects.filter(conversation_id=conversation_id)
            .order_by("seq")
            .values_list("seq", flat=True)
        )
        assert len(seqs) == count, (conversation_id, len(seqs), count)
        assert seqs == list(range(1, count + 1))
        assert Conversation.objects.get(pk=conversation_id).last_seq == count
    external = (
        Message.objects.exclude(external_id=None)
        .exclude(external_id="")
        .values("conversation_id", "external_id")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
    )
    assert not external.exists()
    report = integrity_scan(conversation_id=None, mode=ScanMode.SCAN, trigger=Trigger.COMMAND)
    assert report.total_problems == 0, [c for c in report.checks if c["count"]]
    assert jobs_terminal()
    assert not CompactionRun.objects.filter(status="running").exists()


def start_server(env: dict, *, worker: bool, port: int) -> subprocess.Popen:
    """`manage.py lcm_serve` (uvicorn) on `port`, with or without its background worker;
    returns once the API answers."""
    import httpx2 as httpx

    command = [sys.executable, str(ROOT / "manage.py"), "lcm_serve", "--no-demo", "--no-migrate"]
    command += ["--port", str(port)] + ([] if worker else ["--no-worker"])
    log = open(os.path.join(env["LCM_DATA_DIR"], f"server-{port}.log"), "ab")  # noqa: SIM115
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )

    def up() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"lcm_serve exited with {process.returncode}")
        try:
            httpx.get(f"http://127.0.0.1:{port}/api/v1/models/", timeout=1)
        except httpx.HTTPError:
            return False
        return True

    wait_for(up, timeout=60, step=0.1)
    return process
