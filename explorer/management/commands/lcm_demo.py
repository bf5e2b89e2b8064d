"""Load the demo conversation (see explorer/demo.py)."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand

from core.progress import progress
from explorer.demo import demo_load


class Command(BaseCommand):
    help = (
        "Load a realistic demo conversation: a few hundred messages of an agent's coding "
        "session with tool calls, a large pasted file and several compaction passes "
        "(deterministic summarizer, no network). It is owned by the user 'demo', whose new "
        "random password is printed once. Open the explorer at / and sign in as demo."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--if-empty",
            action="store_true",
            help="Do nothing when the database already holds any conversation (for run "
            "commands that start the app on a fresh machine).",
        )
        parser.add_argument(
            "--json",
            action="store_true",
            help="Print the result (ids, counts, username and the new password) as JSON; "
            "no progress output.",
        )

    def handle(self, *args, **options):
        bar = None

        def on_batch(done: int, total: int) -> None:
            # Progress on stderr: a bar on a terminal, a few lines otherwise, none with --json.
            nonlocal bar
            if bar is None:
                bar = progress(
                    total=total, desc="Loading demo", silent=options["json"], stream=self.stderr
                )
            bar.advance(done - bar.count)

        try:
            result = demo_load(if_empty=options["if_empty"], on_batch=on_batch)
        finally:
            if bar is not None:
                bar.close()
        if options["json"]:
            self.stdout.write(json.dumps(_result_json(result), indent=2))
            return
        if not result.created:
            self.stdout.write("Demo not loaded: the database already has conversations.")
            return
        conversation = result.conversation
        self.stdout.write(
            self.style.SUCCESS(
                f"Demo conversation {conversation.pk} ({conversation.session_id}): "
                f"{result.message_count} messages, {result.compaction_passes} compaction runs."
            )
        )
        self.stdout.write(
            f"Sign in at /accounts/login/ as\n  username: {result.username}\n"
            f"  password: {result.password}\n(printed once; run lcm_demo again for a new one)"
        )


def _result_json(result) -> dict:
    conversation = result.conversation
    return {
        "created": result.created,
        "conversation_id": conversation.pk if conversation else None,
        "session_id": conversation.session_id if conversation else None,
        "message_count": result.message_count,
        "compaction_passes": result.compaction_passes,
        "username": result.username,
        "password": result.password,
    }
