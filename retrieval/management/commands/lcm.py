"""`manage.py lcm describe|grep|expand|tools ...`: the retrieval tools from a shell, as JSON."""

from __future__ import annotations

import json

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.utils.dateparse import parse_datetime

from core.api.errors import LcmError
from core.tool_result import to_json
from retrieval import selectors
from retrieval.grep import GrepRequest, grep_for_user
from retrieval.services import grant_sweep_expired
from retrieval.tool_definitions import TOOL_DEFINITIONS


class _Operator:
    """Who the command acts as without --user: an operator who may read everything."""

    pk = None
    is_authenticated = True
    is_staff = True
    username = "(operator)"


class Command(BaseCommand):
    help = (
        "Retrieval from a shell, printing JSON: `lcm describe ID`, `lcm grep QUERY [--mode "
        "regex|full_text] [--scope messages|summaries|both] [--conversation N]`, `lcm expand "
        "SUMMARY_ID [--depth N] [--include-messages] [--token-cap N]`, `lcm tools`, `lcm "
        "sweep-grants`. Acts as "
        "--user USERNAME (their access rules apply) or, without it, as an operator who can "
        "read every conversation. Errors print the API's error JSON and exit with status 1."
    )

    def add_arguments(self, parser):
        parser.add_argument("--user", help="Act as this user (default: operator, sees all).")
        sub = parser.add_subparsers(dest="action", required=True, title="actions")
        describe = sub.add_parser(
            "describe", help="Describe a summary (sum_...) or file (file_...)."
        )
        describe.add_argument("id")
        grep = sub.add_parser("grep", help="Search messages and summaries.")
        grep.add_argument("query")
        grep.add_argument("--mode", default="full_text", choices=["full_text", "regex"])
        grep.add_argument(
            "--scope", default="both", choices=["messages", "summaries", "both", "files"]
        )
        grep.add_argument("--conversation", type=int, help="Only this conversation id.")
        grep.add_argument("--since", help="ISO 8601 time, inclusive.")
        grep.add_argument("--before", help="ISO 8601 time, exclusive.")
        grep.add_argument("--limit", type=int, default=50, help="1 to 200 (default 50).")
        grep.add_argument("--sort", default="recency", choices=["recency", "relevance"])
        grep.add_argument("--ignore-case", action="store_true", help="Regex only.")
        expand = sub.add_parser("expand", help="Expand a summary.")
        expand.add_argument("summary_id")
        expand.add_argument("--depth", type=int, default=1, help="1 to 10 (default 1).")
        expand.add_argument("--include-messages", action="store_true")
        expand.add_argument(
            "--token-cap", type=int, default=None, help="Default LCM_MAX_EXPAND_TOKENS."
        )
        sub.add_parser("tools", help="Print the tool definitions (Anthropic tool format).")
        sub.add_parser(
            "sweep-grants",
            help="Revoke delegation grants past their expiry (left by a crashed expansion).",
        )

    def handle(self, *args, **options):
        user = self._user(options.get("user"))
        try:
            data = self._run(user, options)
        except LcmError as error:
            self.stdout.write(json.dumps(error.as_dict(), ensure_ascii=False))
            raise CommandError(f"{error.code}: {error.message}") from None
        self.stdout.write(json.dumps(json.loads(to_json(data)), indent=2, ensure_ascii=False))

    def _user(self, username):
        if not username:
            return _Operator()
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user named {username!r}")
        return user

    def _run(self, user, options):
        action = options["action"]
        if action == "describe":
            return selectors.describe_for_user(user=user, item_id=options["id"])
        if action == "expand":
            return selectors.expand_for_user(
                user=user,
                summary_id=options["summary_id"],
                depth=options["depth"],
                include_messages=options["include_messages"],
                token_cap=options["token_cap"],
            ).as_dict()
        if action == "grep":
            request = GrepRequest(
                query=options["query"],
                mode=options["mode"],
                scope=options["scope"],
                conversation_id=options["conversation"],
                since=self._time(options["since"], "--since"),
                before=self._time(options["before"], "--before"),
                limit=options["limit"],
                sort=options["sort"],
                ignore_case=options["ignore_case"],
            )
            return {"results": grep_for_user(user=user, request=request)}
        if action == "sweep-grants":
            return {"revoked": grant_sweep_expired()}
        return {"tools": TOOL_DEFINITIONS}

    def _time(self, raw, flag):
        if raw is None:
            return None
        value = parse_datetime(raw)
        if value is None or value.tzinfo is None:
            raise CommandError(f"{flag} must be an ISO 8601 time with a time zone")
        return value
