"""Keep a job row's lease alive while its work runs.

A lease is a `lease_until` timestamp on the row. The owner renews it every third of
LCM_JOB_LEASE_SECONDS from a small thread (the work itself may sit in a model call for a
while); when the owner dies the renewals stop, the lease expires, and the reconciler or any
other worker takes the job over.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone

logger = logging.getLogger("lcm.workers")


def lease_deadline(now=None):
    return (now or timezone.now()) + timedelta(seconds=settings.LCM_JOB_LEASE_SECONDS)


@contextlib.contextmanager
def lease_kept(queryset):
    """Renew `lease_until` on `queryset` (the owned row, filtered on its live state) until
    the block ends. The first renewal comes a third of a lease after entry."""
    done = threading.Event()
    interval = settings.LCM_JOB_LEASE_SECONDS / 3

    def renew() -> None:
        try:
            while not done.wait(interval):
                try:
                    queryset.update(lease_until=lease_deadline())
                except Exception:  # noqa: BLE001 - a missed renewal is retried next tick
                    logger.warning("lease renewal failed", exc_info=True)
        finally:
            connection.close()  # this thread's own connection

    thread = threading.Thread(target=renew, name="lcm-lease", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(timeout=5)
