"""Prometheus metrics at /metrics, in the text exposition format.

Two sources:
- latencies measured in this process (`observe_ms`), kept as histograms;
- figures read from the database at scrape time (`register_collector`), so counts made
  by background workers (compaction runs, summaries, integrity failures) are exact
  whichever process serves the scrape.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from django.http import HttpResponse

BUCKETS_MS = (1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)


@dataclass(frozen=True)
class Sample:
    name: str
    kind: str  # "counter" or "gauge"
    help: str
    values: tuple[tuple[dict[str, str], float], ...]


_lock = threading.Lock()
_histograms: dict[tuple[str, tuple[tuple[str, str], ...]], list[float]] = {}
_histogram_help: dict[str, str] = {}
_collectors: list[Callable[[], Iterable[Sample]]] = []


def observe_ms(name: str, ms: float, help: str = "", **labels: str) -> None:
    """Record one latency in milliseconds (e.g. lcm_search_latency_ms)."""
    key = (name, tuple(sorted(labels.items())))
    with _lock:
        state = _histograms.setdefault(key, [0.0] * (len(BUCKETS_MS) + 2))
        state[bisect_left(BUCKETS_MS, ms)] += 1  # index len(BUCKETS_MS) is +Inf
        state[-1] += ms
        if help:
            _histogram_help[name] = help


def register_collector(collector: Callable[[], Iterable[Sample]]) -> None:
    if collector not in _collectors:
        _collectors.append(collector)


def _labels(labels: dict[str, str] | Iterable[tuple[str, str]]) -> str:
    pairs = labels.items() if isinstance(labels, dict) else labels
    body = ",".join(
        f'{k}="{str(v).replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'
        for k, v in pairs
    )
    return "{" + body + "}" if body else ""


def render() -> str:
    lines: list[str] = []
    for collector in _collectors:
        for sample in collector():
            lines.append(f"# HELP {sample.name} {sample.help}")
            lines.append(f"# TYPE {sample.name} {sample.kind}")
            for labels, value in sample.values:
                lines.append(f"{sample.name}{_labels(labels)} {value:g}")
    with _lock:
        snapshot = {key: list(state) for key, state in _histograms.items()}
    seen: set[str] = set()
    for (name, labels), state in sorted(snapshot.items()):
        if name not in seen:
            seen.add(name)
            lines.append(f"# HELP {name} {_histogram_help.get(name, name)}")
            lines.append(f"# TYPE {name} histogram")
        cumulative = 0.0
        for bound, count in zip((*BUCKETS_MS, "+Inf"), state[: len(BUCKETS_MS) + 1], strict=True):
            cumulative += count
            lines.append(f"{name}_bucket{_labels((*labels, ('le', str(bound))))} {cumulative:g}")
        lines.append(f"{name}_sum{_labels(labels)} {state[-1]:g}")
        lines.append(f"{name}_count{_labels(labels)} {cumulative:g}")
    return "\n".join(lines) + "\n"


def metrics_view(request) -> HttpResponse:
    return HttpResponse(render(), content_type="text/plain; version=0.0.4; charset=utf-8")
