"""Create (or update) a user and print an API token for it."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from tokens.services import token_rotate


class Command(BaseCommand):
    help = (
        "Create a user (or update an existing one) and print a new API token for it (the "
        "previous default token, if any, is revoked). Clients send it "
        "as 'Authorization: Token <key>'. --password also enables browser sign-in."
    )

    def add_arguments(self, parser):
        parser.add_argument("username", help="The user's name.")
        parser.add_argument("--password", help="Password for browser sign-in (optional).")
        parser.add_argument(
            "--staff", action="store_true", help="Staff users see every conversation and the admin."
        )
        parser.add_argument(
            "--superuser", action="store_true", help="Also grant every admin permission."
        )

    def handle(self, *args, **options):
        username = options["username"].strip()
        if not username:
            raise CommandError("username must not be empty")
        user, created = get_user_model().objects.get_or_create(username=username)
        if options["password"]:
            user.set_password(options["password"])
        elif created:
            user.set_unusable_password()
        if options["staff"] or options["superuser"]:
            user.is_staff = True
        if options["superuser"]:
            user.is_superuser = True
        user.save()
        # Keys are stored hashed and cannot be shown again: each run issues a fresh key
        # (the user's previous "default" token is revoked).
        issued = token_rotate(user=user, name="default", via="command")
        self.stdout.write(f"{'created' if created else 'updated'} user {username}")
        self.stdout.write(f"token: {issued.key}")
