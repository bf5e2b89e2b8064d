#!/usr/bin/env python3
"""The Responses drop-in as Codex uses it, measured through the served app (`lcm_serve`,
default settings, its background worker): a stateless session resent whole each time (the
system prompt as a developer item, then reasoning + function_call + function_call_output
per step, `prompt_cache_key` = the session), grown to ITEMS input items in its first
request, then STEPS more requests of 3 new items each.

Per request: the server's time before it calls the upstream (X-LCM-Server-Ms), and the
time to the first byte at the client, beside the same request sent straight to the same
upstream (the same-run baseline); the upstream (tests/support/fake_responses_api.py, with
its prompt cache model) answers at once and reports the cache-readable tokens, whose share
of the input is printed for both paths.

    scripts/responses_bench.py [--port 8112] [--items 1000] [--steps 40]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx2 as httpx  # the SDKs depend on it (the httpx API, renamed)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# The fake upstream's prompt cache counts tokens with the product's estimator (settings).
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lcmsite.settings")
os.environ.setdefault("LCM_DATA_DIR", tempfile.mkdtemp(prefix="lcm-responses-bench-client-"))
import django  # noqa: E402

django.setup()

from scripts.responses_clis import MODEL, _manage, _wait_up  # noqa: E402
from tests.support.fake_http import RecordedRequest, Scripted  # noqa: E402
from tests.support.fake_responses_api import (  # noqa: E402
    FakeResponsesAPI,
    function_call_item,
    reasoning_item,
    responses_stream,
)

SYSTEM = "You are a coding agent. " * 300  # about Codex's system prompt size (7 KB)


def _answer(request: RecordedRequest) -> Scripted:
    count = len(request.body["input"])
    call = function_call_item("exec_command", {"cmd": f"ls step{count}"}, call_id=f"call_{count}")
    return responses_stream([reasoning_item("next", f"enc{count}=="), call])


def _step(items: list[dict], answer: list[dict]) -> list[dict]:
    call = answer[-1]
    output = {"type": "function_call_output", "call_id": call["call_id"], "output": "a\nb\n" * 20}
    return [*items, *answer, output]


def _history(size: int) -> list[dict]:
    items = [
        {
            "type": "message",
            "role": "developer",
            "content": [{"type": "input_text", "text": SYSTEM}],
        },
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
    ]
    while len(items) < size:
        count = len(items)
        call = function_call_item(
            "exec_command", {"cmd": f"ls step{count}"}, call_id=f"call_{count}"
        )
        items = _step(items, [reasoning_item("next", f"enc{count}=="), call])
    return items


def _send(client: httpx.Client, url: str, body: dict, headers: dict) -> tuple[float, dict, list]:
    """(ms to the first byte, response headers, the output items)."""
    started = time.perf_counter()
    with client.stream("POST", url, json=body, headers=headers) as response:
        first = None
        output = []
        for line in response.iter_lines():
            if first is None:
                first = (time.perf_counter() - started) * 1000
            if line.startswith("data: ") and '"response.output_item.done"' in line:
                output.append(json.loads(line[6:])["item"])
        return first or 0.0, dict(response.headers), output


def _session(client, url, headers, items: int, steps: int, key: str) -> list[tuple[float, float]]:
    history = _history(items)
    timings = []
    for _ in range(steps + 1):
        body = {"model": MODEL, "input": history, "stream": True, "store": False,
                "prompt_cache_key": key, "include": ["reasoning.encrypted_content"]}  # fmt: skip
        first, answer_headers, output = _send(client, url, body, headers)
        timings.append((first, float(answer_headers.get("x-lcm-server-ms", "nan"))))
        history = _step(history, output)
    return timings[1:]  # the first request stores the whole history: reported apart


def _share(reports: list[dict]) -> float:
    spent = sum(r["input_tokens"] for r in reports)
    return sum(r["cached_tokens"] for r in reports) / spent if spent else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--port", type=int, default=8112)
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="lcm-responses-bench-"))
    with FakeResponsesAPI(prompt_cache=True, respond=_answer) as api:
        env = {**os.environ, "LCM_DATA_DIR": str(work), "OPENAI_API_KEY": "sk-bench",
               "OPENAI_BASE_URL": api.base_url, "LCM_MODEL_GPT_MODEL_ID": MODEL}  # fmt: skip
        _manage(env, "migrate", "-v0")
        token = _manage(env, "lcm_create_user", "bench").split()[-1]
        server = subprocess.Popen(
            [sys.executable, str(ROOT / "manage.py"), "lcm_serve", "--port", str(args.port), "--no-demo"],
            env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        try:
            url = f"http://127.0.0.1:{args.port}"
            _wait_up(url + "/openai/v1/models")
            with httpx.Client(timeout=120) as client:
                direct = _session(client, api.base_url + "/responses", {"authorization": "Bearer x"},
                                  args.items, args.steps, "direct")  # fmt: skip
                direct_share = _share(api.cache_reports)
                api.cache_reports.clear()
                through = _session(client, url + "/openai/v1/responses",
                                   {"authorization": f"Bearer {token}"}, args.items, args.steps, "lcm")  # fmt: skip
                through_share = _share(api.cache_reports)
        finally:
            os.killpg(server.pid, 15)
            server.wait(30)
    p50 = statistics.median
    print(f"load: {os.getloadavg()}")
    print(f"items {args.items}+, {args.steps} requests each")
    print(
        f"direct:  first byte p50 {p50(t[0] for t in direct):.1f} ms; cache-readable share {direct_share:.3f}"
    )
    print(f"through: first byte p50 {p50(t[0] for t in through):.1f} ms; server before upstream p50 "
          f"{p50(t[1] for t in through):.1f} ms (max {max(t[1] for t in through):.1f}); "
          f"cache-readable share {through_share:.3f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
