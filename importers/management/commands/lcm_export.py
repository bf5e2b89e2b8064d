"""manage.py lcm_export CONVERSATION_ID [--format jsonl|anthropic|openai] [--output FILE]."""

from __future__ import annotations

import json
import sys

from django.core.management.base import BaseCommand, CommandError

from conversations.models import Conversation
from importers import exporters


class Command(BaseCommand):
    help = (
        "Export a conversation: jsonl (lossless: one message with all its parts per line; "
        "imports back with `lcm_import jsonl`), anthropic (a Messages request body) or "
        "openai (Chat Completions messages). Writes to stdout unless --output is given."
    )

    def add_arguments(self, parser):
        parser.add_argument("conversation_id", type=int)
        parser.add_argument("--format", choices=exporters.FORMATS, default="jsonl")
        parser.add_argument("--output", help="File to write (default: stdout).")

    def handle(self, *args, **options):
        conversation = Conversation.objects.filter(pk=options["conversation_id"]).first()
        if conversation is None:
            raise CommandError(f"conversation {options['conversation_id']} does not exist")
        if options["output"]:
            with open(options["output"], "w", encoding="utf-8") as out:
                self._write(conversation, options["format"], out)
        else:
            self._write(conversation, options["format"], sys.stdout)

    def _write(self, conversation, fmt: str, out) -> None:
        if fmt == "jsonl":
            for line in exporters.export_jsonl(conversation):
                out.write(line)
            return
        body = (
            exporters.export_anthropic(conversation)
            if fmt == "anthropic"
            else exporters.export_openai(conversation)
        )
        out.write(json.dumps(body, ensure_ascii=False, indent=2) + "\n")
