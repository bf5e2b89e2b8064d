"""Console benchmarks (`lcm_bench --only console`).

- The chat page's server time for a session with 1,000 turns (the newest page of 50 is
  rendered; older turns are paged), through Django's test client in-process.
- How soon the first delta of an answer is painted after the server streamed it: a real
  `lcm_serve` child process and headless Chromium; the server's moment is the `ts` of the
  step journal's first text entry (written just before the event is published), the
  browser's is the first frame after the text was set (requestAnimationFrame, then a
  task). Both clocks are this machine's.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.test import Client

from benchmarks.conversations import bench_user
from benchmarks.harness import BenchContext, BenchRow, benchmark, p50, percentile
from turns import runner
from turns.jobs import commit_pending
from turns.journal import read_entries
from turns.models import ProviderStep
from turns.services import session_create, turn_accept

CHROMIUM = "/usr/bin/chromium"


def _page_ms(client: Client, url: str, runs: int) -> list[float]:
    client.get(url)  # warm templates and the session
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        response = client.get(url)
        samples.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200, response.status_code
    return samples


def _fill(session, count: int) -> float:
    """`count` real turns (offline provider), each committed; returns seconds taken.
    Retrieval is off while filling (its embedding dominates a turn's time and the page
    does not depend on it)."""
    started = time.perf_counter()
    with _retrieval_off():
        _fill_turns(session, count)
    return time.perf_counter() - started


@contextmanager
def _retrieval_off():
    """A copy of the engine config (LCM_CONFIG_FILE, read at each turn) whose [budget]
    max_retrieval_tokens is 0: a turn's retrieval budget, so it retrieves nothing."""
    original = os.environ.get("LCM_CONFIG_FILE", "")
    text = Path(original).expanduser().read_text() if original.strip() else ""
    text = re.sub(r"(?m)^\s*max_retrieval_tokens\s*=.*$", "", text)
    if re.search(r"(?m)^\[budget\]\s*$", text):
        text = re.sub(r"(?m)^\[budget\]\s*$", "[budget]\nmax_retrieval_tokens = 0", text, count=1)
    else:
        text += "\n[budget]\nmax_retrieval_tokens = 0\n"
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "config.toml"
        config.write_text(text)
        os.environ["LCM_CONFIG_FILE"] = str(config)
        try:
            yield
        finally:
            os.environ["LCM_CONFIG_FILE"] = original
            if not original:
                del os.environ["LCM_CONFIG_FILE"]


def _fill_turns(session, count: int) -> None:
    for i in range(count):
        session.refresh_from_db()
        turn = turn_accept(
            session=session, branch=session.active_branch, content=f"benchmark message {i}"
        )
        runner.run_turn(turn_id=turn.id)
        commit_pending(branch=session.active_branch)


def _row(name: str, samples: list[float], target: str, detail: str) -> BenchRow:
    return BenchRow(
        name,
        p50(samples),
        "ms",
        target,
        f"p95 {percentile(samples, 0.95):.1f} ms, {len(samples)} samples; {detail}",
    )


@benchmark("console")
def console_pages(ctx: BenchContext) -> list[BenchRow]:
    user = bench_user()
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(user)
    runs = max(5, ctx.n(20))
    count = ctx.n(1_000)
    session = session_create(owner=user, title="bench: long chat", default_model="offline")
    fill_seconds = _fill(session, count)
    rows = [
        _row(
            f"chat page, {count:,} turns",
            _page_ms(client, f"/chat/{session.pk}/", runs),
            "< 300 ms",
            f"newest 50 turns; filling took {fill_seconds:.0f} s "
            f"({1000 * fill_seconds / count:.0f} ms per turn incl. commit, retrieval off)",
        ),
        _row(
            f"chat page, {count:,} turns, oldest page",
            _page_ms(client, f"/chat/{session.pk}/?before=51", runs),
            "< 300 ms",
            "",
        ),
    ]
    if Path(CHROMIUM).exists():
        rows.append(_first_paint(ctx, user, client))
    else:
        ctx.notes.append(f"console: {CHROMIUM} missing, first-delta paint not measured")
    return rows


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _first_paint(ctx: BenchContext, user, client: Client) -> BenchRow:
    from playwright.sync_api import sync_playwright

    port = _free_port()
    env = {**os.environ, "LCM_OFFLINE_STREAM_DELAY_MS": "50", "LCM_OFFLINE_STREAM_CHUNKS": "6"}
    manage = Path(settings.BASE_DIR) / "manage.py"
    server = subprocess.Popen(
        [
            sys.executable,
            str(manage),
            "lcm_serve",
            "--no-worker",
            "--no-demo",
            "--no-migrate",
            "--port",
            str(port),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    session = session_create(owner=user, title="bench: paint", default_model="offline")
    samples: list[float] = []
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # ORM reads between browser steps
    try:
        _wait_for(url)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM,
                args=[
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-background-networking",
                ],
            )
            context = browser.new_context()
            context.add_cookies(
                [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": url}]
            )
            page = context.new_page()
            page.goto(f"{url}/chat/{session.pk}/")
            for i in range(max(5, ctx.n(20))):
                page.fill("#message", f"paint sample {i}")
                page.click("#send")
                page.wait_for_function(
                    "() => document.getElementById('chat').dataset.idle === 'true'"
                )
                turn_id = page.evaluate("window.lcmConsole.lastStream.turn")
                painted = page.evaluate(f"window.lcmConsole.firstPaint['{turn_id}']")
                step = ProviderStep.objects.get(turn_id=turn_id, step_index=0)
                sent = next(
                    e["ts"]
                    for e in read_entries(Path(step.stream_path))
                    if e.get("event_type") == "lcm.text"
                )
                samples.append(painted - sent * 1000)
            browser.close()
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(20)
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous
    return _row(
        "first delta painted after the server streamed it",
        samples,
        "< 100 ms",
        "lcm_serve (uvicorn) child + headless Chromium, offline provider",
    )


def _wait_for(url: str, timeout: float = 30.0) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url + "/accounts/login/", timeout=1).read()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"lcm_serve did not answer on {url}")
