"""Run the benchmarks and print a table (the figures for docs/benchmarks.md)."""

from __future__ import annotations

import argparse
import dataclasses
import gc
import importlib
import importlib.util
import json

from django.core.management.base import BaseCommand, CommandError

from benchmarks.harness import BENCH_MODULES, REGISTRY, BenchContext, machine_line, render_table
from core.progress import progress


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
        parser.add_argument(
            "--reference-workload",
            action="store_true",
            help=(
                "Like for like with the reference implementation (docs/benchmarks.md, "
                "'Reference workload'): its workload and settings, every row on a fresh "
                "SQLite file and on PostgreSQL (--postgres-url), in-process through the "
                "service layer, plus one message at a time through `lcm_serve` over HTTP; "
                "prints the table with the reference figures and the ratios."
            ),
        )
        parser.add_argument(
            "--postgres-url",
            default=None,
            help=(
                "With --reference-workload: the scratch PostgreSQL database (created if "
                "missing). Default: LCM_DATABASE_URL when it is PostgreSQL; none: SQLite only."
            ),
        )
        parser.add_argument(
            "--steps",
            default="",
            help=(
                "With --reference-workload: comma-separated subset of "
                "ingest,assembly,compaction,expand,history,cjk,http (default all)."
            ),
        )
        parser.add_argument(
            "--databases",
            default="sqlite,postgresql",
            help="With --reference-workload: which of sqlite,postgresql to run (default both).",
        )
        parser.add_argument("--reference-child", action="store_true", help=argparse.SUPPRESS)
        parser.add_argument(
            "--curves",
            action="store_true",
            help=(
                "Scaling curves of ingest, assemble, grep and expand at 1k, 10k, 100k and 1M "
                "messages on the configured database (benchmarks/curves.py); prints the "
                "table and draws docs/scaling.png (about 10 minutes on PostgreSQL)."
            ),
        )
        parser.add_argument(
            "--curve-sizes",
            default="",
            help="With --curves: comma-separated sizes instead of 1000,10000,100000,1000000.",
        )

    def handle(self, *args, **options):
        if options["reference_workload"]:
            return self._reference(options)
        if options["curves"]:
            return self._curves(options)
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

    def _reference(self, options):
        from benchmarks import reference

        if options["scale"] <= 0:
            raise CommandError("--scale must be positive")
        steps = [s for s in options["steps"].split(",") if s]
        unknown = [s for s in steps if s not in reference.STEPS]
        if unknown:
            raise CommandError(f"unknown step(s) {unknown}; known: {', '.join(reference.STEPS)}")
        if options["reference_child"]:  # one database, the configured one: JSON out
            from django.core.management import call_command

            call_command("migrate", interactive=False, verbosity=0)
            gc.freeze()
            ctx = BenchContext(scale=options["scale"])
            results = reference.measure_all(ctx, steps, log=self.stderr.write)
            payload = {
                "machine": machine_line(),
                "rows": {k: dataclasses.asdict(v) for k, v in results.items()},
            }
            self.stdout.write("\n" + json.dumps(payload))
            return
        self._reference_parent(options, reference)

    def _reference_parent(self, options, reference):
        import os
        import subprocess
        import sys
        import tempfile

        from django.conf import settings

        postgres_url = options["postgres_url"]
        configured = settings.DATABASES["default"]
        if postgres_url is None and configured["ENGINE"].endswith("postgresql"):
            postgres_url = os.environ.get("LCM_DATABASE_URL") or os.environ.get("DATABASE_URL")
        vendors = [v for v in options["databases"].split(",") if v]
        if "postgresql" in vendors and not postgres_url:
            self.stderr.write("no PostgreSQL URL (--postgres-url): SQLite only")
            vendors.remove("postgresql")
        results, machines, loads = {}, {}, []
        manage = os.path.join(settings.BASE_DIR, "manage.py")
        for vendor in vendors:
            data_dir = tempfile.mkdtemp(prefix=f"lcm-refbench-{vendor}-")
            if vendor == "postgresql":
                reference.ensure_postgres_database(postgres_url)
            env = reference.child_database_env(vendor, postgres_url=postgres_url, data_dir=data_dir)
            command = [
                sys.executable, manage, "lcm_bench", "--reference-workload",
                "--reference-child", "--scale", str(options["scale"]),
            ]  # fmt: skip
            if options["steps"]:
                command += ["--steps", options["steps"]]
            loads.append(reference.load_average())
            done = subprocess.run(command, env=env, stdout=subprocess.PIPE, text=True)
            if done.returncode != 0:
                raise CommandError(f"the {vendor} run failed (exit {done.returncode})")
            payload = json.loads(done.stdout.strip().splitlines()[-1])
            results[vendor] = payload["rows"]
            machines[vendor] = payload["machine"]
            loads.append(reference.load_average())
        machine = "; ".join(dict.fromkeys(machines.values()))
        load = ", ".join(f"[{x}]" for x in loads)
        if options["json"]:
            self.stdout.write(json.dumps({"machine": machine, "load": loads, "rows": results}))
            return
        self.stdout.write(reference.render_reference_table(results, machine, load))

    def _curves(self, options):
        from benchmarks import curves

        try:
            sizes = [int(s) for s in options["curve_sizes"].split(",") if s] or curves.SIZES
        except ValueError:
            raise CommandError("--curve-sizes must be comma-separated integers") from None
        gc.freeze()
        out = curves.default_path()
        result = curves.run(sizes, out_path=out, log=lambda line: self.stderr.write(line))
        self.stdout.write(f"Machine: {machine_line()}\n")
        self.stdout.write(curves.table(result))
        self.stdout.write(f"- plot: {out}")
