"""Ingest spread over several web processes while workers compact: the driver shared by
the scale-out test (tests/workers/test_scale_out.py) and its benchmark
(scripts/lcm_scale_out.py).

Writers append single messages and batches, each request to the next web process in
turn (round-robin, as a reverse proxy would); one requester asks every conversation for
a compaction (a full sweep by default) again and again (`compact` without `wait`: a job goes on the
shared queue, and at most one is pending per conversation), so the workers always have
work while messages arrive. Every answer that is not 2xx, and every transport error, is
an error; the writers count what was acknowledged, per conversation and per process.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field

import httpx2 as httpx

BATCH = 20


@dataclass
class IngestResult:
    seconds: float
    acknowledged: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    per_server: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    requests: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    errors: list[str] = field(default_factory=list)

    @property
    def messages(self) -> int:
        return sum(self.acknowledged.values())


def run_ingest(
    *,
    base_urls: list[str],
    token: str,
    conversation_ids: list[int],
    seconds: float,
    writers: int = 6,
    compact_every: float | None = 0.2,
    compact_mode: str = "full",
) -> IngestResult:
    """Half the writers append one message per request, half a batch of BATCH; with
    `compact_every` None nobody requests compactions."""
    result = IngestResult(seconds=seconds)
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds
    counter = itertools.count()
    servers = itertools.cycle(base_urls)
    headers = {"Authorization": f"Token {token}"}
    clients = {url: httpx.Client(base_url=url, headers=headers, timeout=60) for url in base_urls}

    def next_server() -> str:
        with lock:
            return next(servers)

    def post(name: str, path: str, body: dict) -> str | None:
        """The server that acknowledged the request, or None after an error."""
        url = next_server()
        try:
            response = clients[url].post(path, json=body)
        except httpx.HTTPError as error:
            with lock:
                result.errors.append(f"{name} via {url}: {error!r}")
            return None
        with lock:
            result.requests[name] += 1
            if response.status_code >= 300:
                result.errors.append(
                    f"{name} via {url}: {response.status_code} {response.text[:300]}"
                )
                return None
        return url

    def writer(index: int) -> None:
        batch = index % 2 == 1
        conversation_id = conversation_ids[index % len(conversation_ids)]
        path = f"/api/v1/conversations/{conversation_id}/messages/"
        while time.monotonic() < stop_at:
            count = BATCH if batch else 1
            messages = [
                {
                    "role": "user" if n % 2 else "assistant",
                    "content": f"scale {next(counter)}: rolling deploy v2.{n} of worker.py",
                }
                for n in range(count)
            ]
            body = {"messages": messages} if batch else messages[0]
            url = post("append_batch" if batch else "append_one", path, body)
            if url is not None:
                with lock:
                    result.acknowledged[conversation_id] += count
                    result.per_server[url] += count

    def requester() -> None:
        for conversation_id in itertools.cycle(conversation_ids):
            if time.monotonic() >= stop_at:
                return
            path = f"/api/v1/conversations/{conversation_id}/compact/"
            post("compact", path, {"mode": compact_mode})
            time.sleep(compact_every / len(conversation_ids))

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(writers)]
    if compact_every is not None:
        threads.append(threading.Thread(target=requester))
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        for client in clients.values():
            client.close()
    return result


def overlapping_runs(intervals: list[tuple[float, float]], slack: float = 0.0) -> int:
    """The most intervals (start, end) open at one instant (an end before a start at the
    same instant: back-to-back runs do not overlap). `slack` seconds are taken off each
    end: timestamps are read by the processes, not at the instant the lease changes hands
    (a run's end is read just before its releasing UPDATE, the next one's start just
    before its claiming INSERT), so back-to-back runs can seem to overlap by that much."""
    points = sorted(
        [(start, 1) for start, _ in intervals] + [(end - slack, -1) for _, end in intervals]
    )
    most = current = 0
    for _, step in points:
        current += step
        most = max(most, current)
    return most
