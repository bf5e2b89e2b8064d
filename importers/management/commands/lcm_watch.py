"""manage.py lcm_watch: follow the coding agents' session stores and capture them live."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from importers.watch.stores import AGENTS, Store, default_roots, make_stores


class Command(BaseCommand):
    help = (
        "Follow the session files of Claude Code (~/.claude/projects, or "
        "$CLAUDE_CONFIG_DIR/projects), Codex ($CODEX_HOME/sessions and archived_sessions, "
        "default ~/.codex), OpenCode ($XDG_DATA_HOME/opencode: opencode.db and storage/) and "
        "Gemini CLI (~/.gemini/tmp) as the agents write them, and import what is new: into "
        "this server for --user, or into a remote one (--server URL --token T). Offsets are "
        "kept in the database, so a restart goes on where it stopped and nothing is imported "
        "twice. --once imports what is there and exits (--file: one file only). See "
        "docs/capture.md."
    )

    def add_arguments(self, parser):
        parser.add_argument("--user", help="Username that owns the captured sessions (local).")
        parser.add_argument("--server", help="Send to this LCM server (e.g. https://lcm.example).")
        parser.add_argument("--token", help="--server: the user's API token.")
        parser.add_argument(
            "--token-file",
            help="--server: read the token from this file (keeps it out of the process list).",
        )
        for agent in AGENTS:
            parser.add_argument(
                f"--{agent}-dir",
                action="append",
                metavar="DIR",
                help=f"{agent}: the folder to follow instead of the default (repeatable).",
            )
            parser.add_argument(
                f"--no-{agent}", action="store_true", help=f"Do not follow {agent}."
            )
        parser.add_argument("--once", action="store_true", help="Import what is there and exit.")
        parser.add_argument(
            "--file",
            help="With --once: catch up this one file only (Claude Code's PreCompact hook).",
        )
        parser.add_argument(
            "--poll",
            type=float,
            nargs="?",
            const=1.0,
            metavar="SECONDS",
            help="Poll every SECONDS (default 1) instead of file events (network folders).",
        )
        parser.add_argument(
            "--rescan",
            type=float,
            default=60.0,
            help="With file events: a full pass every RESCAN seconds anyway (default 60).",
        )
        parser.add_argument("--quiet", action="store_true", help="Print only problems.")

    def handle(self, *args, **options):
        from importers.watch.loop import Watcher

        if options["file"] and not options["once"]:
            raise CommandError("--file goes with --once")
        stores = make_stores(self._roots(options))
        if not stores:
            raise CommandError("every agent is switched off")
        watcher = Watcher(stores, self._sink(options), log=self._log(options))
        if options["once"]:
            self._once(watcher, options)
            return
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        mode = f"polling every {options['poll']}s" if options["poll"] else "file events"
        for store in stores:
            present = "" if store.root.is_dir() else " (not there yet)"
            self.stdout.write(f"following {store.agent}: {store.root}{present}")
        self.stdout.write(f"lcm_watch: {mode}, into {watcher.sink.target}")
        watcher.follow(
            stop,
            poll=bool(options["poll"]),
            interval=options["poll"] or 1.0,
            rescan=options["rescan"],
        )

    def _roots(self, options) -> dict[str, list[Path]]:
        roots = default_roots()
        chosen = {}
        for agent in AGENTS:
            key = agent.replace("-", "_")
            if options[f"no_{key}"]:
                continue
            given = options[f"{key}_dir"]
            chosen[agent] = (
                [Path(p).expanduser().resolve() for p in given] if given else roots[agent]
            )
        return chosen

    def _sink(self, options):
        if options["server"]:
            from importers.watch.remote import RemoteSink

            token = options["token"]
            if options["token_file"]:
                token = Path(options["token_file"]).expanduser().read_text().strip()
            if not token:
                raise CommandError("--server needs --token or --token-file")
            return RemoteSink(options["server"], token, log=self.stderr.write)
        if not options["user"]:
            raise CommandError("give --user NAME (local) or --server URL --token T (remote)")
        user = get_user_model().objects.filter(username=options["user"]).first()
        if user is None:
            raise CommandError(f"no user named {options['user']!r}")
        from importers.watch.local import LocalSink

        return LocalSink(user)

    def _log(self, options):
        def log(text: str) -> None:
            if not options["quiet"] or "refused" in text or "line" in text:
                self.stdout.write(text)

        return log

    def _once(self, watcher, options) -> None:
        if options["file"]:
            path = Path(options["file"]).expanduser().resolve()
            if watcher.watched_for(path) is None and path.suffix == ".jsonl":
                # A hook's transcript outside the followed folders: Claude Code's layout.
                watcher.stores.append(Store("claude-code", path.parent.parent, "claude-code"))
            if watcher.watched_for(path) is None:
                raise CommandError(f"{path} is not a session file under a followed folder")
            result = watcher.run_pass([path], progress=not options["quiet"])
        else:
            result = watcher.run_pass(progress=not options["quiet"])
        self.stdout.write(
            f"lcm_watch --once: {result.files} file(s) changed, {result.units} session(s) "
            f"imported, {result.messages} new message(s), {result.waiting} waiting"
        )
        if result.waiting:
            raise SystemExit(1)
