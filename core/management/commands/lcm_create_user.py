"""Create (or update) a user and print an API token for it."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from rest_framework.authtoken.models import Token


class Command(BaseCommand):
    help = (
        "Create a user (or update an existing one) and print its API token. Clients send it "
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
        token, _ = Token.objects.get_or_create(user=user)
        self.stdout.write(f"{'created' if created else 'updated'} user {username}")
        self.stdout.write(f"token: {token.key}")
