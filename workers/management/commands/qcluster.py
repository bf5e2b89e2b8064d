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

It also starts the urgent queue's cluster (core/job_queues.py: compaction and state
commits, ahead of indexing) as a child process with `Q_CLUSTER_NAME` set, since django-q2
reads its queue name once, at import; the child stops with it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from django.conf import settings
from django_q.cluster import Cluster
from django_q.management.commands.qcluster import Command as QClusterCommand

from core import shutdown
from core.job_queues import urgent_queue


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

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument(
            "--no-urgent",
            action="store_true",
            help="Do not start the urgent queue's cluster beside this one (run it elsewhere "
            "with Q_CLUSTER_NAME=<LCM_QUEUE_NAME>-urgent, docs/deploy.md).",
        )

    def handle(self, *args, **options):
        settings.SECRET_KEY  # noqa: B018 - the cluster signs tasks with it
        if options.get("cluster_name"):
            os.environ["Q_CLUSTER_NAME"] = options["cluster_name"]
        shutdown.arm()  # before the fork: the sentinel and workers share the flag
        alone = options.get("no_urgent") or options.get("run_once")
        urgent = None if alone else _start_urgent()
        cluster = Cluster()
        stop_at: list[float] = []

        def on_signal(signum, frame):
            if stop_at:
                return
            stop_at.append(time.monotonic() + settings.LCM_WORKER_STOP_SECONDS)
            shutdown.request()
            if urgent is not None:
                with contextlib.suppress(ProcessLookupError):
                    urgent.send_signal(signal.SIGTERM)
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
        if urgent is not None:
            try:
                urgent.wait(timeout=settings.LCM_WORKER_STOP_SECONDS + 2)
            except subprocess.TimeoutExpired:
                for pid in [urgent.pid, *_descendants(urgent.pid)]:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
        self.stdout.write("worker cluster stopped")


def _start_urgent() -> subprocess.Popen | None:
    """The urgent queue's cluster as a child (None: the queue is off, or this process is
    that cluster)."""
    queue = urgent_queue()
    if queue is None or os.environ.get("Q_CLUSTER_NAME") == queue:
        return None
    manage = Path(settings.BASE_DIR) / "manage.py"
    env = {**os.environ, "Q_CLUSTER_NAME": queue}
    # In our process group: a signal to the group (a supervisor's kill) reaches it too.
    return subprocess.Popen([sys.executable, str(manage), "qcluster", "--no-urgent"], env=env)
