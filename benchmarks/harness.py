"""The benchmark harness: rows, the registry `lcm_bench` runs, timing helpers, the table."""

from __future__ import annotations

import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import django
from django.db import connection


@dataclass
class BenchRow:
    name: str
    figure: float
    unit: str
    target: str = ""
    detail: str = ""


@dataclass
class BenchContext:
    scale: float = 1.0
    notes: list[str] = field(default_factory=list)

    def n(self, count: int) -> int:
        return max(1, int(count * self.scale))


REGISTRY: dict[str, Callable[[BenchContext], list[BenchRow]]] = {}
# One module per subsystem, here in benchmarks/ (never in a product package).
BENCH_MODULES = [
    "benchmarks.conversations",
    "benchmarks.largefiles",
    "benchmarks.compaction",
    "benchmarks.summarizers",
    "benchmarks.retrieval",
    "benchmarks.providers",
    "benchmarks.turns",
    "benchmarks.turn_engine",
    "benchmarks.integrity",
    "benchmarks.explorer",
    "benchmarks.console",
    "benchmarks.memory",
    "benchmarks.embeddings",
    "benchmarks.embeddings_mixed",
    "benchmarks.embeddings_tool_recall",
    "benchmarks.indexing_served",
    "benchmarks.grep_served",
    "benchmarks.recall_search",
    "benchmarks.recall_passing",
    "benchmarks.importers",
    "benchmarks.watch",
    "benchmarks.mcpserver",
    "benchmarks.tokens",
    "benchmarks.retention",
    "benchmarks.cost",
    "benchmarks.cache_served",
    "benchmarks.claude_code_replay",
    "benchmarks.dropin",
    "benchmarks.secrets",
    "benchmarks.receipts",
]


def benchmark(name: str):
    def register(fn):
        REGISTRY[name] = fn
        return fn

    return register


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def p50(samples: list[float]) -> float:
    return statistics.median(samples)


class Timer:
    def __enter__(self):
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.start


def machine_line() -> str:
    import os

    cpus = os.cpu_count()
    mem = ""
    try:
        with open("/proc/meminfo") as fh:
            kb = int(fh.readline().split()[1])
            mem = f", {kb / 1024 / 1024:.0f} GiB"
    except OSError:
        pass
    db = connection.vendor
    if db == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SHOW server_version")
            db += " " + cursor.fetchone()[0].split()[0]
    else:
        import sqlite3

        db += " " + sqlite3.sqlite_version
    return (
        f"{platform.machine()} {cpus} cores{mem}; Python {platform.python_version()}; "
        f"Django {django.get_version()}; {db}"
    )


def render_table(rows: list[BenchRow]) -> str:
    header = "| benchmark | figure | unit | target | detail |\n|---|---:|---|---|---|"
    lines = [header]
    for row in rows:
        figure = f"{row.figure:,.1f}" if row.figure < 1000 else f"{row.figure:,.0f}"
        lines.append(f"| {row.name} | {figure} | {row.unit} | {row.target} | {row.detail} |")
    return "\n".join(lines)
