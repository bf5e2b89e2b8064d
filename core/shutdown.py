"""A cooperative stop flag shared by a `qcluster` and every process it forks.

`arm()` runs in the cluster's main process before the sentinel and its workers are forked,
so they all inherit the same `multiprocessing.Event`. On SIGTERM the main process sets it:
a worker finishes the compaction pass it is in, then releases its job (`ShutdownRequested`
between passes) and claims no new job. Outside a cluster the flag is never set.
"""

from __future__ import annotations

import multiprocessing

_event = None


class ShutdownRequested(Exception):  # noqa: N818 - a request, not an error
    """Raised between two passes when the worker is stopping."""


def arm() -> None:
    global _event
    if _event is None:
        _event = multiprocessing.get_context("fork").Event()


def request() -> None:
    if _event is not None:
        _event.set()


def requested() -> bool:
    return _event is not None and _event.is_set()


def raise_if_requested() -> None:
    if requested():
        raise ShutdownRequested("the worker is stopping")
