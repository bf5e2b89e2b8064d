"""Periodic work in the background worker: a django-q Schedule (every minute, created once
after migrate) plus a timer thread in each worker process (at spawn, then every N seconds),
so a reconciler runs soon after a worker comes back. Used by the job and turn reconcilers.
"""

from __future__ import annotations

import logging
import multiprocessing
import threading
import time
from collections.abc import Callable

from django.db import close_old_connections, connection

logger = logging.getLogger(__name__)

_started: set[str] = set()
_lock = threading.Lock()


def ensure_schedule(*, name: str, func: str) -> None:
    """The every-minute django-q Schedule `name` running `func` (idempotent)."""
    try:
        from django_q.models import Schedule

        Schedule.objects.get_or_create(
            name=name,
            defaults={
                "func": func,
                "schedule_type": Schedule.MINUTES,
                "minutes": 1,
                "repeats": -1,
            },
        )
    except Exception:  # noqa: BLE001 - django_q tables missing (partial migrate): skip
        logger.debug("schedule %s not created", name, exc_info=True)


def _loop(name: str, work: Callable[[], object], interval: Callable[[], float]) -> None:
    while True:
        try:
            close_old_connections()
            work()
        except Exception:  # noqa: BLE001 - never let the timer die
            logger.exception("periodic %s failed", name)
        finally:
            connection.close()
        time.sleep(interval())


def start_timer(*, name: str, work: Callable[[], object], interval: Callable[[], float]) -> None:
    """Run `work` now and then every `interval()` seconds in a daemon thread (once per
    process and name)."""
    with _lock:
        if name in _started:
            return
        _started.add(name)
    threading.Thread(target=_loop, args=(name, work, interval), name=name, daemon=True).start()


def on_worker_spawn(*, name: str, work: Callable[[], object], interval: Callable[[], float]):
    """Connect a timer to django-q2's post_spawn. django-q's sync mode (tests) sends
    post_spawn in the calling process too: only a real worker process gets the timer."""
    from django_q.signals import post_spawn

    def spawned(sender=None, proc_name=None, **kwargs) -> None:
        if multiprocessing.current_process().name != "MainProcess":
            start_timer(name=name, work=work, interval=interval)

    post_spawn.connect(spawned, weak=False, dispatch_uid=name)
