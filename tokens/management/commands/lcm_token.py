"""Issue, rotate, list and revoke API tokens (docs/tokens.md)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from tokens.models import ApiToken
from tokens.selectors import token_list
from tokens.services import TokenError, token_issue, token_revoke, token_rotate


def _user(username: str):
    try:
        return get_user_model().objects.get(username=username)
    except get_user_model().DoesNotExist:
        raise CommandError(f"no user named {username!r}") from None


class Command(BaseCommand):
    help = (
        "Manage API tokens. Only a hash of each key is stored: `issue` and `rotate` print "
        "the key once. Clients send it as 'Authorization: Token <key>' (or Bearer)."
    )

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        for action, text in (
            ("issue", "a new token for a user and client name (refused if one is live)"),
            ("rotate", "revoke the live token of that name and issue its replacement"),
        ):
            p = sub.add_parser(action, help=text)
            p.add_argument("username")
            p.add_argument("--name", default="default", help="Client or device name.")
            p.add_argument(
                "--days",
                type=int,
                default=None,
                help="Lifetime in days (default LCM_TOKEN_DEFAULT_DAYS; 0: never expires).",
            )
        p = sub.add_parser("list", help="live tokens (prefix, name, expiry, last use)")
        p.add_argument("username", nargs="?")
        p.add_argument("--all", action="store_true", help="Include revoked tokens.")
        p = sub.add_parser("revoke", help="revoke tokens by prefix, or a user's by name")
        p.add_argument("username")
        p.add_argument("--name", help="Client name (default: every live token of the user).")
        p.add_argument("--prefix", help="The token's prefix as `list` shows it.")

    def handle(self, *args, **options):
        action = options["action"]
        if action in ("issue", "rotate"):
            user = _user(options["username"])
            days = options["days"]
            if days is not None and days < 0:
                raise CommandError("--days must be 0 (never expires) or more")
            service = token_issue if action == "issue" else token_rotate
            try:
                issued = service(user=user, name=options["name"], days=days, via="command")
            except TokenError as exc:
                raise CommandError(str(exc)) from None
            expires = issued.token.expires_at
            self.stdout.write(
                f"{action}d token {issued.token.prefix}… ({issued.token.name}) for "
                f"{user.get_username()}, expires {expires:%Y-%m-%d}"
                if expires
                else f"{action}d token {issued.token.prefix}… ({issued.token.name}) for "
                f"{user.get_username()}, never expires"
            )
            self.stdout.write(f"token: {issued.key}")
            return
        if action == "list":
            user = _user(options["username"]) if options["username"] else None
            for token in token_list(user=user, include_revoked=options["all"]):
                self.stdout.write(_describe(token))
            return
        user = _user(options["username"])
        tokens = token_list(user=user)
        if options["name"]:
            tokens = tokens.filter(name=options["name"])
        if options["prefix"]:
            tokens = tokens.filter(prefix=options["prefix"].rstrip("…"))
        revoked = [token for token in tokens if token_revoke(token=token, via="command")]
        if not revoked:
            raise CommandError("no live token matches")
        for token in revoked:
            self.stdout.write(f"revoked {_describe(token)}")


def _describe(token: ApiToken) -> str:
    def when(value):
        return f"{value:%Y-%m-%d %H:%M}" if value else "-"

    state = "revoked " + when(token.revoked_at) if token.revoked_at else "live"
    legacy = "\tlegacy" if token.legacy else ""
    return (
        f"{token.user.get_username()}\t{token.prefix}…\t{token.name}\t{state}\t"
        f"expires {when(token.expires_at) if token.expires_at else 'never'}\t"
        f"last used {when(token.last_used_at)}{legacy}"
    )
