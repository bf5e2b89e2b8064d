"""Bring the whole app up: migrate, load the demo into an empty database, start the
background worker (django-q2 `qcluster`) and serve HTTP with waitress."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from django.conf import settings
from django.core.management import call_command, get_commands
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = (
        "Run the LCM server: apply migrations, load the demo conversation when the database "
        "is empty, start the background worker (qcluster) as a child process, and serve the "
        "app with waitress on --host:--port (default 127.0.0.1:8000). Ctrl-C stops both."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--host", default="127.0.0.1", help="Address to listen on (default 127.0.0.1)."
        )
        parser.add_argument(
            "--port", type=int, default=8000, help="Port to listen on (default 8000)."
        )
        parser.add_argument(
            "--threads", type=int, default=8, help="HTTP worker threads (default 8)."
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
        try:
            from waitress import serve

            from lcmsite.wsgi import application

            self.stdout.write(f"serving on http://{options['host']}:{options['port']}/")
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
            serve(
                application, host=options["host"], port=options["port"], threads=options["threads"]
            )
        finally:
            if worker is not None:
                _stop_group(worker)


def _stop_group(worker: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
        try:
            os.killpg(worker.pid, sig)
        except ProcessLookupError:
            return
        try:
            worker.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue
