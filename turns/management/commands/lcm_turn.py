"""Run one chat turn from a shell and print the answer."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from core.api.errors import LcmError
from turns import runner, selectors, services
from turns.jobs import commit_pending
from turns.models import Session


class Command(BaseCommand):
    help = (
        "Send one user message as a turn of a chat session (a new session unless --session "
        "is given), run it to its end with the provider, and print the answer. "
        "The state commit runs in the background worker; --commit runs it here."
    )

    def add_arguments(self, parser):
        parser.add_argument("--user", required=True, help="Username of the session owner.")
        parser.add_argument("--session", help="Id of an existing session of that user.")
        parser.add_argument("--branch", help="Branch id (default: the session's active branch).")
        parser.add_argument("--model", help="Model name from the model config (GET /models/).")
        parser.add_argument("--message", required=True, help="The user message.")
        parser.add_argument("--title", default="", help="Title of a new session.")
        parser.add_argument(
            "--commit", action="store_true", help="Commit the branch's pending turns afterwards."
        )

    def handle(self, *args, **options):
        user = get_user_model().objects.filter(username=options["user"]).first()
        if user is None:
            raise CommandError(f"no user named {options['user']!r}")
        try:
            # Check the model (and its key) before anything is stored.
            services.resolve_model(Session(default_model=""), options["model"])
            if options["session"]:
                session = selectors.session_get_for_user(user=user, session_id=options["session"])
            else:
                session = services.session_create(
                    owner=user, title=options["title"], default_model=options["model"] or ""
                )
            branch = selectors.branch_for_turn(session=session, branch_id=options["branch"])
            turn = services.turn_accept(
                session=session, branch=branch, content=options["message"], model=options["model"]
            )
            turn = runner.run_turn(turn_id=turn.id)
            if options["commit"]:
                commit_pending(branch=branch)
                turn.refresh_from_db()
        except LcmError as error:
            raise CommandError(f"{error.code}: {error.message}") from None
        answer = (turn.final_assistant_message or {}).get("rendered_text", "")
        self.stdout.write(answer)
        self.stderr.write(
            f"session {session.id} branch {branch.id} turn {turn.id} (seq {turn.turn_seq}) "
            f"phase {turn.phase}" + (f" error {turn.error}" if turn.error else "")
        )
        if turn.phase == "failed":
            raise CommandError(f"turn failed: {turn.error}")
