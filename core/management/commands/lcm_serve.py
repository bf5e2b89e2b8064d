"""Bring the whole app up: migrate, load the demo into an empty database, start the
background worker (django-q2 `qcluster`) and serve HTTP with uvicorn (ASGI).

ASGI because turns stream: each streaming response is a coroutine reading the turn's event
log, not a thread held for the whole answer, so fifty open streams leave the rest of the
API as fast as before (docs/benchmarks.md). Ordinary views still run as Django sync views.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from django.conf import settings
from django.core.management import call_command, get_commands
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = (
        "Run the LCM server: apply migrations, load the demo conversation when the database "
        "is empty, start the background worker (qcluster) as a child process, and serve the "
        "app with uvicorn (ASGI) on --host:--port (default 127.0.0.1:8000). SIGTERM or "
        "Ctrl-C stops both: running turns end as incomplete, keeping their output, and the "
        "reconciler finishes anything left over at the next start."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--host", default="127.0.0.1", help="Address to listen on (default 127.0.0.1)."
        )
        parser.add_argument(
            "--port", type=int, default=8000, help="Port to listen on (default 8000)."
        )
        parser.add_argument(
            "--workers",
            type=int,
            default=1,
            help="Web processes (default 1); more than one needs PostgreSQL.",
        )
        parser.add_argument(
            "--graceful-seconds",
            type=float,
            default=5.0,
            help="How long open connections get to finish on shutdown (default 5).",
        )
        parser.add_argument(
            "--no-worker", action="store_true", help="Do not start the background worker."
        )
        parser.add_argument(
            "--no-demo", action="store_true", help="Do not load the demo into an empty database."
        )
        parser.add_argument(
            "--no-migrate", action="store_true", help="Do not apply migrations first."
        )
        parser.add_argument(
            "--watch-user",
            metavar="NAME",
            help="Also run `manage.py lcm_watch --user NAME` beside the server: the coding "
            "agents' sessions on this machine are captured live for NAME (docs/capture.md).",
        )

    def handle(self, *args, **options):
        if not options["no_migrate"]:
            call_command("migrate", interactive=False, verbosity=0)
            self.stdout.write(
                "database ready: " + settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
            )
        if not options["no_demo"] and "lcm_demo" in get_commands():
            call_command("lcm_demo", if_empty=True)
        worker = None
        if not options["no_worker"]:
            manage = Path(settings.BASE_DIR) / "manage.py"
            # Its own process group, so stopping it also stops the cluster's child processes.
            worker = subprocess.Popen(
                [sys.executable, str(manage), "qcluster"], start_new_session=True
            )
            self.stdout.write(f"background worker started (pid {worker.pid})")
            from core import lifecycle

            # The worker starts its own bounded stop as the server starts stopping, so the
            # two run side by side instead of one after the other.
            lifecycle.on_server_stop(lambda _seconds: _signal_leader(worker))
            # uvicorn re-raises the SIGTERM it caught once it has shut down; with the
            # default action that would end this process before the `finally` below
            # waits for the worker. A no-op handler lets the wait run.
            signal.signal(signal.SIGTERM, lambda signum, frame: None)
        watcher = None
        if options["watch_user"]:
            manage = Path(settings.BASE_DIR) / "manage.py"
            # A command of a higher layer: a process of its own, never imported from here.
            command = [sys.executable, str(manage), "lcm_watch", "--user", options["watch_user"]]
            watcher = subprocess.Popen(command + ["--quiet"], start_new_session=True)
            self.stdout.write(f"session watcher started (pid {watcher.pid})")
            # As for the worker: let uvicorn's re-raised SIGTERM reach the `finally` below.
            signal.signal(signal.SIGTERM, lambda signum, frame: None)
        try:
            self.stdout.write(f"serving on http://{options['host']}:{options['port']}/")
            serve(
                host=options["host"],
                port=options["port"],
                workers=options["workers"],
                graceful_seconds=options["graceful_seconds"],
            )
        finally:
            if watcher is not None:
                _stop_watcher(watcher)
            if worker is not None:
                _stop_group(worker)


def serve(*, host: str, port: int, workers: int = 1, graceful_seconds: float = 5.0) -> None:
    """Serve lcmsite.asgi with uvicorn until SIGTERM/SIGINT.

    On the signal, the stop hooks run first (the turn runner ends its streams), so open
    streaming responses finish at once instead of holding the graceful window."""
    import uvicorn

    from core import lifecycle

    class Server(uvicorn.Server):
        def handle_exit(self, sig, frame):
            # In a thread: the hooks may wait, and the event loop must keep delivering
            # the streams' last events meanwhile.
            threading.Thread(
                target=lifecycle.server_stopping, args=(graceful_seconds,), daemon=True
            ).start()
            super().handle_exit(sig, frame)

    config = uvicorn.Config(
        "lcmsite.asgi:application",
        host=host,
        port=port,
        workers=workers,
        lifespan="off",  # Django speaks no lifespan; start hooks run below instead
        timeout_graceful_shutdown=graceful_seconds,
        access_log=False,
        log_level="info",
    )
    lifecycle.server_started()
    if workers > 1:
        # uvicorn's supervisor runs the worker processes with its own server class: a
        # stopping worker ends its open streams at the graceful timeout, and turns cut
        # short there are finished by the reconciler (journal recovery) at the next pass.
        uvicorn.run(
            "lcmsite.asgi:application",
            host=host,
            port=port,
            workers=workers,
            lifespan="off",
            timeout_graceful_shutdown=graceful_seconds,
            access_log=False,
        )
        return
    Server(config).run()


def _signal_leader(worker: subprocess.Popen) -> None:
    # Only the cluster's main process: it stops its workers itself, within
    # LCM_WORKER_STOP_SECONDS (workers/management/commands/qcluster.py).
    with contextlib.suppress(ProcessLookupError):
        worker.send_signal(signal.SIGTERM)


def _stop_group(worker: subprocess.Popen) -> None:
    _signal_leader(worker)
    with contextlib.suppress(subprocess.TimeoutExpired):
        worker.wait(timeout=settings.LCM_WORKER_STOP_SECONDS + 1)
    # Whatever is left of its process group (nothing, unless the cluster itself hung).
    with contextlib.suppress(ProcessLookupError):
        os.killpg(worker.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        worker.wait(timeout=5)


def _stop_watcher(watcher: subprocess.Popen) -> None:
    # SIGTERM ends its loop between passes; offsets are written after each delivery, so
    # a kill after the grace loses nothing either (docs/capture.md).
    with contextlib.suppress(ProcessLookupError):
        watcher.send_signal(signal.SIGTERM)
    try:
        watcher.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(watcher.pid, signal.SIGKILL)
        watcher.wait(timeout=5)
