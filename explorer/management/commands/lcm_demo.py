"""Load the demo conversation (see explorer/demo.py)."""

from __future__ import annotations

from django.core.management.base import BaseCommand

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

    def handle(self, *args, **options):
        result = demo_load(if_empty=options["if_empty"])
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
