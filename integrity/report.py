"""Run every check over a scope and shape the result: total, and per check its count and
up to 20 examples."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from django.db import connection, transaction

from integrity.checks import CHECKS, Scope

MAX_EXAMPLES = 20


@dataclass(frozen=True)
class CheckOutcome:
    name: str
    problems: list[dict]

    @property
    def count(self) -> int:
        return len(self.problems)

    def as_dict(self) -> dict:
        return {"name": self.name, "count": self.count, "examples": self.problems[:MAX_EXAMPLES]}


@dataclass(frozen=True)
class ScanResult:
    scope: Scope
    outcomes: list[CheckOutcome]
    duration_ms: float

    @property
    def total_problems(self) -> int:
        return sum(outcome.count for outcome in self.outcomes)

    def checks_json(self) -> list[dict]:
        return [outcome.as_dict() for outcome in self.outcomes]

    def counts(self) -> dict[str, int]:
        return {outcome.name: outcome.count for outcome in self.outcomes}


@contextmanager
def one_snapshot() -> Iterator[None]:
    """PostgreSQL: every check reads the same snapshot (a read-only repeatable-read
    transaction, so checks agree with each other while writers go on), without JIT, which
    costs more to compile these queries than they take to run. SQLite: no transaction (its
    transactions here are IMMEDIATE, which would block writers for the whole scan)."""
    if connection.vendor != "postgresql":
        yield
        return
    nested = connection.in_atomic_block
    with transaction.atomic(), connection.cursor() as cursor:
        if not nested:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        cursor.execute("SET LOCAL jit = off")
        yield


def scan(scope: Scope, on_check: Callable[[str], None] | None = None) -> ScanResult:
    """Run every check (reads only); `on_check(name)` after each (for progress)."""
    start = time.perf_counter()
    outcomes = []
    with one_snapshot():
        for check in CHECKS:
            outcomes.append(CheckOutcome(check.name, check.detect(scope)))
            if on_check is not None:
                on_check(check.name)
    return ScanResult(scope, outcomes, (time.perf_counter() - start) * 1000)
