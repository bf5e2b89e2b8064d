"""A mixed load against a running server: writers (single and batch appends), one
compaction loop, readers (assemble, grep, expand). Used by `scripts/lcm_load.py` (60 s, the
figures in docs/benchmarks.md) and by a short CI test (tests/workers/test_load.py).

Every request is timed; any answer that is not 2xx, and any transport error, is an error.
The writers count what the server acknowledged, so the caller can check afterwards that
exactly those messages are stored (0 lost, 0 duplicated).
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field

import httpx2 as httpx

from benchmarks.harness import percentile

BATCH = 50


@dataclass
class LoadResult:
    seconds: float
    samples: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: list[str] = field(default_factory=list)
    acknowledged: dict[int, int] = field(default_factory=lambda: defaultdict(int))

    def table(self) -> str:
        rows = [
            "| operation | requests | req/s | p50 ms | p99 ms |",
            "|---|---:|---:|---:|---:|",
        ]
        total = 0
        for name in sorted(self.samples):
            times = self.samples[name]
            total += len(times)
            rows.append(
                f"| {name} | {len(times)} | {len(times) / self.seconds:.1f} "
                f"| {percentile(times, 0.5) * 1000:.1f} | {percentile(times, 0.99) * 1000:.1f} |"
            )
        rows.append(f"| all | {total} | {total / self.seconds:.1f} | | |")
        return "\n".join(rows) + f"\n\nerrors: {len(self.errors)}"


def run_load(
    *,
    base_url: str,
    token: str,
    conversation_ids: list[int],
    seconds: float,
    writers: int = 8,
    readers: int = 4,
    seed: int = 12,
) -> LoadResult:
    result = LoadResult(seconds=seconds)
    lock = threading.Lock()
    summary_ids: list[str] = []
    stop_at = time.monotonic() + seconds
    counter = itertools.count()
    headers = {"Authorization": f"Token {token}"}

    def call(client: httpx.Client, name: str, path: str, body: dict) -> dict | None:
        started = time.perf_counter()
        try:
            response = client.post(path, json=body)
        except httpx.HTTPError as error:
            with lock:
                result.errors.append(f"{name}: {error!r}")
            return None
        took = time.perf_counter() - started
        with lock:
            result.samples[name].append(took)
            if response.status_code >= 300:
                result.errors.append(f"{name}: {response.status_code} {response.text[:300]}")
                return None
        return response.json()

    def writer(index: int) -> None:
        batch = index % 2 == 1  # half the writers append one message, half a batch
        conversation_id = conversation_ids[index % len(conversation_ids)]
        with httpx.Client(base_url=base_url, headers=headers, timeout=60) as client:
            while time.monotonic() < stop_at:
                count = BATCH if batch else 1
                messages = [
                    {
                        "role": "user" if n % 2 else "assistant",
                        "content": f"load {next(counter)}: checking deploy v1.{n} of cache.py",
                    }
                    for n in range(count)
                ]
                body = {"messages": messages} if batch else messages[0]
                name = "append_batch" if batch else "append_one"
                path = f"/api/v1/conversations/{conversation_id}/messages/"
                if call(client, name, path, body) is not None:
                    with lock:
                        result.acknowledged[conversation_id] += count

    def compactor() -> None:
        with httpx.Client(base_url=base_url, headers=headers, timeout=120) as client:
            for conversation_id in itertools.cycle(conversation_ids):
                if time.monotonic() >= stop_at:
                    return
                path = f"/api/v1/conversations/{conversation_id}/compact/"
                answer = call(client, "compact", path, {"mode": "incremental", "wait": True})
                if answer is not None:
                    with lock:
                        summary_ids.extend(answer.get("summaries_created", []))

    def reader(index: int) -> None:
        rng = random.Random(seed + index)
        with httpx.Client(base_url=base_url, headers=headers, timeout=60) as client:
            while time.monotonic() < stop_at:
                conversation_id = rng.choice(conversation_ids)
                kind = rng.choice(("assemble", "grep", "expand"))
                with lock:
                    summary_id = rng.choice(summary_ids) if summary_ids else None
                if kind == "expand" and summary_id:
                    body = {"summary_id": summary_id, "depth": 1, "include_messages": True}
                    call(client, "expand", "/api/v1/expand/", body)
                elif kind == "grep":
                    body = {"query": "deploy", "conversation_id": conversation_id, "limit": 20}
                    call(client, "grep", "/api/v1/grep/", body)
                else:
                    path = f"/api/v1/conversations/{conversation_id}/assemble/"
                    call(client, "assemble", path, {})

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(writers)]
    threads += [threading.Thread(target=reader, args=(i,)) for i in range(readers)]
    threads.append(threading.Thread(target=compactor))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return result
