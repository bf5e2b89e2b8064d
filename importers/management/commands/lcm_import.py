"""manage.py lcm_import FORMAT PATH --user NAME: import transcripts or a lossless-claw database."""

from __future__ import annotations

import json

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from core.api.errors import LcmError
from core.progress import progress
from importers.models import Format
from importers.services import import_file


class Command(BaseCommand):
    help = (
        "Import conversations owned by --user. FORMAT: claude-code (a Claude Code session "
        ".jsonl, with its sub-agent files), codex (a Codex CLI rollout .jsonl or .jsonl.zst), "
        "opencode (opencode.db, a storage/ folder or `opencode export` JSON), gemini (a Gemini "
        "CLI chat .json or .jsonl; docs/capture.md), anthropic / openai (a JSON array of messages, or an object with "
        "'messages' / 'input'), jsonl (one message per line), lossless-claw (its SQLite "
        "lcm.db). Re-importing the same source adds nothing. Exits with status 1 when a "
        "conversation could not be imported (nothing of it was written). See "
        "docs/import-export.md."
    )

    def add_arguments(self, parser):
        parser.add_argument("format", choices=Format.values, help="The source format.")
        parser.add_argument("path", help="The file (or OpenCode storage folder) to import.")
        parser.add_argument("--user", required=True, help="Username that will own the import.")
        parser.add_argument(
            "--session-id",
            help="Session id of the conversation to import into (transcript formats; default: "
            "the transcript's own session id, else the file name).",
        )
        parser.add_argument(
            "--files-dir",
            help="lossless-claw: directory holding its lcm-files (large file bytes), for a "
            "database moved away from its original storage paths.",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="Print what would be imported; write nothing."
        )
        parser.add_argument("--json", action="store_true", help="Print the report as JSON.")

    def handle(self, *args, **options):
        user = get_user_model().objects.filter(username=options["user"]).first()
        if user is None:
            raise CommandError(f"no user named {options['user']!r}")
        # The total is known once the source is read: the report starts then.
        bars = []

        def set_total(total: int) -> None:
            bars.append(
                progress(
                    total=total,
                    desc=f"Importing {options['format']}",
                    silent=options["json"],
                    stream=self.stderr,
                )
            )

        def advance(n: int) -> None:
            if bars:
                bars[-1].advance(n)

        try:
            report = import_file(
                format=options["format"],
                path=options["path"],
                owner=user,
                session_id=options["session_id"],
                files_dir=options["files_dir"],
                dry_run=options["dry_run"],
                advance=advance,
                set_total=set_total,
            )
        except LcmError as error:
            raise CommandError(error.message) from None
        finally:
            for bar in bars:
                bar.close()
        data = report.as_dict()
        if options["json"]:
            self.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str))
        else:
            self._print(data)
        if any(c.failed for c in report.conversations):
            raise SystemExit(1)  # the report says which conversation, and why

    def _print(self, data: dict) -> None:
        verb = "would import" if data["dry_run"] else "imported"
        self.stdout.write(f"{data['format']} {data['source']}: {verb} in {data['seconds']}s")
        source_counts = data["notes"].get("source_counts")
        header = f"  {'table':<18}{'rows':>10}"
        if source_counts:
            header += f"{'in source':>12}"
        self.stdout.write(header)
        for table, count in data["totals"].items():
            line = f"  {table:<18}{count:>10}"
            if source_counts:
                line += f"{source_counts.get(table, 0):>12}"
            self.stdout.write(line)
        for conversation in data["conversations"]:
            state = (
                "failed"
                if conversation.get("failed")
                else ("new" if conversation["created"] else "existing")
            )
            self.stdout.write(
                f"  conversation {conversation['conversation_id']} "
                f"({conversation['session_id']}, {state}): "
                f"{conversation['counts']['messages']} message(s)"
            )
            for problem in conversation["problems"]:
                self.stdout.write(f"    ! {problem['code']}: {problem['message']}")
        for error in data["errors"]:
            self.stdout.write(f"  ! line {error['line']}: {error['message']}")
