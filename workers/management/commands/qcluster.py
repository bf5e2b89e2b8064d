"""`manage.py qcluster` with a bounded, cooperative stop (replaces django-q2's command).

django-q2's own SIGTERM handler asks the sentinel to stop and then waits, without limit,
for each worker to finish its current task (a compaction may run for minutes). Here the
signal instead:
1. sets the shared stop flag (core.shutdown): a worker finishes the pass it is in,
   releases its job so another worker takes it at once, and claims nothing new;
2. asks the cluster to stop as django-q2 would (in a thread);
3. after LCM_WORKER_STOP_SECONDS kills whatever is still running. A pass is one
   transaction, so a killed pass leaves nothing behind; the job's lease then expires and
   the reconciler hands it out again.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path

from django.conf import settings
from django_q.cluster import Cluster
from django_q.management.commands.qcluster import Command as QClusterCommand

from core import shutdown


def _descendants(root: int) -> list[int]:
    """Every live descendant of `root` (Linux /proc; empty elsewhere)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


class Command(QClusterCommand):
    help = (
        "Start the background worker cluster (django-q2). On SIGTERM or SIGINT it stops "
        "within LCM_WORKER_STOP_SECONDS: running jobs finish their current pass and are "
        "released for another worker; what still runs at the deadline is killed."
    )

    def handle(self, *args, **options):
        settings.SECRET_KEY  # noqa: B018 - the cluster signs tasks with it
        if options.get("cluster_name"):
            os.environ["Q_CLUSTER_NAME"] = options["cluster_name"]
        shutdown.arm()  # before the fork: the sentinel and workers share the flag
        cluster = Cluster()
        stop_at: list[float] = []

        def on_signal(signum, frame):
            if stop_at:
                return
            stop_at.append(time.monotonic() + settings.LCM_WORKER_STOP_SECONDS)
            shutdown.request()
            threading.Thread(target=cluster.stop, name="lcm-cluster-stop", daemon=True).start()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        cluster.start()
        if options.get("run_once"):
            on_signal(signal.SIGTERM, None)
        family: set[int] = set()
        tick = 0
        while cluster.sentinel.is_alive():
            if tick % 10 == 0 or stop_at:
                # Remember the workers while the sentinel lives: once it is gone they are
                # re-parented and /proc no longer links them to us.
                family.update(_descendants(os.getpid()))
            if stop_at and time.monotonic() > stop_at[0]:
                for pid in family | set(_descendants(os.getpid())):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                break
            tick += 1
            time.sleep(0.1)
        self.stdout.write("worker cluster stopped")
