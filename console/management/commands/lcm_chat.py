"""`manage.py lcm_chat`: the terminal chat client (console/terminal/) over the HTTP API."""

from __future__ import annotations

import os

from django.core.management.base import BaseCommand, CommandError

from console.terminal.chat import main


class Command(BaseCommand):
    help = (
        "Chat in the terminal through the HTTP API: the console's header (session, branch, "
        "head state, pending turns, phase, Stream durable/displayed bytes), streamed answers "
        "that resume after a dropped connection, and slash commands (/help lists them: "
        "/model /history /chunks /retrieve /attach /fork /rollback /branches /switch /pin "
        "/unpin /pending /commit /context). Without --session a new session is created."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--url",
            "--server",
            dest="url",
            default=os.environ.get("LCM_CHAT_URL", "http://127.0.0.1:8000"),
            help="Server base URL (env LCM_CHAT_URL; default http://127.0.0.1:8000).",
        )
        parser.add_argument(
            "--token",
            default=os.environ.get("LCM_CHAT_TOKEN", ""),
            help="API token (env LCM_CHAT_TOKEN; `manage.py lcm_create_user` prints one).",
        )
        parser.add_argument("--session", default="", help="Open this session id.")
        parser.add_argument("--title", default="", help="Title of a new session.")
        parser.add_argument(
            "--model", default="", help="Model for the new session and the next turns."
        )

    def handle(self, *args, **options):
        if not options["token"]:
            raise CommandError("an API token is required: --token or LCM_CHAT_TOKEN")
        try:
            code = main(
                url=options["url"],
                token=options["token"],
                session=options["session"] or None,
                title=options["title"],
                model=options["model"],
                stdout=self.stdout._out,
            )
        except ValueError as error:
            raise CommandError(str(error)) from None
        if code:
            raise CommandError("could not open the chat session")
