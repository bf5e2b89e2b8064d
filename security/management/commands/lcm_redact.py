"""manage.py lcm_redact: redact a secret or messages from a conversation, a turn session
or all of a user's data, through everything derived from them; verify; resume."""

from __future__ import annotations

import json
import sys

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from conversations.models import Conversation
from core.api.errors import LcmError
from security.models import Redaction
from security.redaction import jobs, queue
from security.redaction.request import parse, scope_of_conversation, scope_of_session, scope_of_user
from security.redaction.verify import verify


class Command(BaseCommand):
    help = (
        "Redaction (docs/security.md): `redact` replaces the text by `[redacted: <reason> "
        "<id>]` in the messages and everything derived from them (summaries regenerated up "
        "the DAG, memory units and vectors, full-text rows, large files, archive segments, "
        "journals, turn rows), then verifies, as the API's jobs do (the same request is the "
        "same job; it runs here unless `--queue`); `--dry-run` lists every place it would "
        "touch, and a literal of fewer than 8 characters or a regex needs one first "
        "(`--confirm-dry-run ID`). "
        "`verify` scans every place the product stores data for strings (read from stdin, "
        "one a line) and their encodings, and exits 1 if any is found. `resume` finishes "
        "jobs a crash left unfinished. `show` prints a job's report. Give the secret on "
        "stdin (`--stdin`) rather than as an argument, which other users can see."
    )

    def add_arguments(self, parser):
        actions = parser.add_subparsers(dest="action", required=True)
        redact = actions.add_parser("redact", help="redact (or --dry-run)")
        scope = redact.add_mutually_exclusive_group(required=True)
        scope.add_argument("--conversation", type=int, help="one conversation id")
        scope.add_argument("--session", help="a turn session id (all its branches)")
        scope.add_argument("--user", help="all of a user's data (user name or id)")
        selector = redact.add_mutually_exclusive_group(required=True)
        selector.add_argument("--message-ids", help="whole messages: ids, comma-separated")
        selector.add_argument("--span", help="MESSAGE_ID:START:END, characters of one message")
        selector.add_argument("--literal", help="a literal string (prefer --stdin)")
        selector.add_argument("--regex", help="a Python regular expression")
        selector.add_argument(
            "--stdin", action="store_true", help="read the literal from stdin (one line)"
        )
        redact.add_argument("--reason", default="secret", help="written into the marker")
        redact.add_argument("--dry-run", action="store_true", help="list the places only")
        redact.add_argument(
            "--confirm-dry-run",
            metavar="ID",
            help="a finished dry run of the same selector (needed for a literal of fewer "
            "than 8 characters and for a regex)",
        )
        redact.add_argument(
            "--queue",
            action="store_true",
            help="leave the job to the background worker and print it at once "
            "(`lcm_redact show ID` follows it)",
        )
        redact.add_argument("--as-user", help="who is recorded as redacting (user name)")
        check = actions.add_parser("verify", help="scan every place for strings on stdin")
        check.add_argument("--redaction", help="also record the result on this job")
        resume = actions.add_parser("resume", help="finish unfinished jobs")
        resume.add_argument("redaction", nargs="?", help="one job id (default: every one)")
        show = actions.add_parser("show", help="a job's report")
        show.add_argument("redaction")

    def handle(self, *args, action, **options):
        try:
            handlers = {
                "redact": self._redact,
                "verify": self._verify,
                "resume": self._resume,
                "show": self._show,
            }
            output = handlers[action](**options)
        except LcmError as error:
            raise CommandError(f"{error.message} {json.dumps(error.extra)}") from None
        self.stdout.write(json.dumps(output, indent=2, sort_keys=True, default=str))
        if action == "verify" and output["occurrences"]:
            sys.exit(1)

    def _scope(self, *, conversation, session, user, **_):
        from turns.models import Session

        if conversation is not None:
            row = Conversation.objects.filter(pk=conversation).first()
            if row is None:
                raise CommandError(f"conversation {conversation} not found")
            return scope_of_conversation(row)
        if session is not None:
            row = Session.objects.filter(pk=session).first()
            if row is None:
                raise CommandError(f"session {session} not found")
            return scope_of_session(row)
        return scope_of_user(_user(user))

    def _redact(self, **options):
        data = {
            "reason": options["reason"],
            "dry_run": options["dry_run"],
            "confirm_dry_run": options["confirm_dry_run"],
        }
        if options["message_ids"]:
            data["message_ids"] = _integers(options["message_ids"].split(","), "--message-ids")
        elif options["span"]:
            message_id, start, end = _integers(options["span"].split(":"), "--span", count=3)
            data["span"] = {"message_id": message_id, "start": start, "end": end}
        elif options["stdin"]:
            data["literal"] = sys.stdin.readline().rstrip("\n")
        elif options["literal"] is not None:
            data["literal"] = options["literal"]
        else:
            data["regex"] = options["regex"]
        request = parse(data, self._scope(**options))
        actor = _user(options["as_user"]) if options["as_user"] else None
        row, _ = queue.submit(request, actor=actor, via="command", queued=options["queue"])
        if not options["queue"]:
            queue.run_queued(row.pk)  # here, to the end (no-op if it was already done)
            row.refresh_from_db()
        return jobs.report(row)

    def _verify(self, *, redaction, **_):
        strings = [line.rstrip("\n") for line in sys.stdin if line.strip()]
        if not strings:
            raise CommandError("give the strings to look for on stdin, one a line")
        result = verify(strings).as_dict()
        if redaction:
            Redaction.objects.filter(pk=redaction).update(verification=result)
        return result

    def _resume(self, *, redaction, **_):
        if redaction:
            return jobs.report(jobs.resume(redaction))
        return {"resumed": jobs.resume_unfinished()}

    def _show(self, *, redaction, **_):
        row = Redaction.objects.filter(pk=redaction).first()
        if row is None:
            raise CommandError(f"redaction {redaction} not found")
        return jobs.report(row)


def _user(name: str):
    users = get_user_model().objects
    found = users.filter(username=name).first()
    if found is None and name.isdigit():
        found = users.filter(pk=int(name)).first()
    if found is None:
        raise CommandError(f"user {name} not found")
    return found


def _integers(values: list[str], option: str, count: int | None = None) -> list[int]:
    try:
        numbers = [int(v) for v in values]
    except ValueError:
        raise CommandError(f"{option}: integers only") from None
    if count is not None and len(numbers) != count:
        raise CommandError(f"{option}: {count} integers separated by ':'")
    return numbers
