"""Run the benchmarks and print a table (the figures for docs/benchmarks.md)."""

from __future__ import annotations

import dataclasses
import gc
import importlib
import importlib.util
import json

from django.core.management.base import BaseCommand, CommandError

from lcmsite.bench.core import BENCH_MODULES, REGISTRY, BenchContext, machine_line, render_table
from lcmsite.progress import progress


class Command(BaseCommand):
    help = (
        "Build synthetic conversations in the configured database and print a table of "
        "measured figures (ingest, compaction, assembly, retrieval, integrity). The data "
        "is written under a throw-away user 'lcm-bench'. Use a scratch database."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--only",
            action="append",
            default=[],
            help="Run only the named benchmark (repeatable). See --list.",
        )
        parser.add_argument("--list", action="store_true", help="List the benchmarks and exit.")
        parser.add_argument(
            "--scale",
            type=float,
            default=1.0,
            help="Multiply every data size by this factor (e.g. 0.1 for a quick run).",
        )
        parser.add_argument(
            "--json",
            action="store_true",
            help="Print the rows (and notes) as JSON instead of a table; no progress output.",
        )

    def handle(self, *args, **options):
        for module in BENCH_MODULES:
            if importlib.util.find_spec(module) is not None:
                importlib.import_module(module)
        if options["list"]:
            for name in REGISTRY:
                self.stdout.write(name)
            return
        unknown = [n for n in options["only"] if n not in REGISTRY]
        if unknown:
            raise CommandError(
                f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(REGISTRY)}"
            )
        if options["scale"] <= 0:
            raise CommandError("--scale must be positive")
        gc.freeze()  # the state the server runs in (lcmsite/wsgi.py)
        ctx = BenchContext(scale=options["scale"])
        rows = []
        chosen = [n for n in REGISTRY if not options["only"] or n in options["only"]]
        # Progress on stderr: a bar on a terminal, a line per minute otherwise, none with --json.
        with progress(
            total=len(chosen),
            desc="Benchmarks",
            silent=options["json"],
            stream=self.stderr,
            interval=60,
        ) as bar:
            for name in chosen:
                bar.set_description(f"Benchmark {name}")
                bar.note(f"running {name} ...")
                rows.extend(REGISTRY[name](ctx))
                bar.advance()
        if options["json"]:
            payload = {
                "machine": machine_line(),
                "rows": [dataclasses.asdict(row) for row in rows],
                "notes": ctx.notes,
            }
            self.stdout.write(json.dumps(payload, indent=2))
            return
        self.stdout.write(f"Machine: {machine_line()}\n")
        self.stdout.write(render_table(rows))
        for note in ctx.notes:
            self.stdout.write(f"- {note}")
