"""Evaluate the memory on a public long-conversation benchmark (docs/memory.md)."""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from benchmarks import recall_eval


class Command(BaseCommand):
    help = (
        "recall: load a dataset in the LoCoMo layout (REALTALK) or the BEAM layout, ingest "
        "it through the messages service, wait for indexing, ask every question through "
        "grep (hybrid, semantic, full_text) and print evidence recall at 500/1,000/2,000 "
        "tokens by category, with p50/p95 latency, beside BM25 over single messages in the "
        "same run. Writes under a user 'lcm-eval': use a scratch database."
    )

    def add_arguments(self, parser):
        parser.add_argument("task", choices=["recall"])
        parser.add_argument("path", help="A dataset file or folder (see docs/memory.md).")
        parser.add_argument("--format", choices=sorted(recall_eval.LOADERS), required=True)
        parser.add_argument(
            "--modes",
            default=",".join(recall_eval.MODES),
            help="Comma-separated grep modes to ask (default: hybrid,semantic,full_text).",
        )
        parser.add_argument(
            "--limit-conversations", type=int, default=None, help="Only the first N."
        )
        parser.add_argument(
            "--limit-questions", type=int, default=None, help="Only the first N per conversation."
        )
        parser.add_argument("--json", default=None, help="Also write the figures to this file.")
        parser.add_argument(
            "--tag",
            default=None,
            help=(
                "Name the ingested conversations with this tag; a later run with the same tag "
                "asks again without ingesting (to compare query-time settings)."
            ),
        )

    def handle(self, *args, **options):
        path = Path(options["path"])
        if not path.exists():
            raise CommandError(f"{path} does not exist")
        modes = tuple(m for m in options["modes"].split(",") if m)
        unknown = [m for m in modes if m not in recall_eval.MODES]
        if unknown:
            raise CommandError(f"unknown mode(s): {', '.join(unknown)}")
        conversations = recall_eval.LOADERS[options["format"]](path)
        if options["limit_conversations"]:
            conversations = conversations[: options["limit_conversations"]]
        if not conversations:
            raise CommandError(f"no conversation found in {path}")

        def progress(name, scores):
            self.stderr.write(f"{name}: {scores.questions} questions so far")

        scores = recall_eval.run(
            conversations,
            modes=modes,
            limit_questions=options["limit_questions"],
            progress=progress,
            tag=options["tag"],
        )
        self.stdout.write(recall_eval.render(scores, modes))
        if options["json"]:
            Path(options["json"]).write_text(json.dumps(scores.as_dict(), indent=2))
