"""Run callables in real threads at once against the database, the way the concurrency tests do.

Each callable gets its own thread (so its own database connection, which the thread closes
when done), all threads wait at one barrier so the work starts together, and the caller gets
the results back in the callables' order. A thread still running after `timeout` seconds, or
any error raised in a thread, fails the test with every error listed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from django.db import connections


def run_together(*works: Callable, times: int = 1, timeout: float = 120) -> list:
    """Run each of `works`, `times` times over, in its own thread, started at one barrier.

    Returns the results in order (`run_together(f, times=3)` is `[f(), f(), f()]`, made at
    once). Raises the first error a thread raised, with all of them listed in its notes.
    """
    calls = [work for work in works for _ in range(times)]
    barrier = threading.Barrier(len(calls))
    results: list = [None] * len(calls)
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            barrier.wait(timeout=timeout)
            results[index] = calls[index]()
        except BaseException as error:  # noqa: BLE001 - raised in the test's thread below
            errors.append(error)
        finally:
            connections.close_all()  # the thread's own connection, never the test's

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(calls))]
    _start_and_join(threads, timeout)
    if errors:
        first = errors[0]
        first.add_note(f"{len(errors)} of {len(calls)} threads failed: {errors!r}")
        raise first
    return results


def _start_and_join(threads: list[threading.Thread], timeout: float) -> None:
    """Start every thread, then wait for all of them for `timeout` seconds in total."""
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    running = sum(thread.is_alive() for thread in threads)
    if running:
        pytest.fail(f"{running} of {len(threads)} threads still running after {timeout}s")
