"""manage.py lcm_rotate_key: re-encrypt stored files under the current encryption key."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from core import crypto
from security.rotation import BUSY_SECONDS, rotate_all
from security.services import audit_record


class Command(BaseCommand):
    help = (
        "Re-encrypt large-file objects, archive segments (each written anew, read back and "
        "verified before its row switches to it; safe to interrupt and run again), stream "
        "journals and turn event logs under "
        "LCM_ENCRYPTION_KEY. Rotation: set the new key in LCM_ENCRYPTION_KEY, move the old "
        "one to LCM_ENCRYPTION_OLD_KEYS, run this command, then drop the old key. Files "
        "stored in clear are encrypted too. --generate prints a new key and changes nothing."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--generate", action="store_true", help="print a new Fernet key and exit"
        )
        parser.add_argument(
            "--busy-seconds",
            type=float,
            default=BUSY_SECONDS,
            help="skip stream files modified this recently (a live stream may still write "
            f"them; default {BUSY_SECONDS:g})",
        )

    def handle(self, *args, generate: bool, busy_seconds: float, **options):
        if generate:
            self.stdout.write(crypto.generate_key())
            return
        if not crypto.encryption_enabled():
            raise CommandError("LCM_ENCRYPTION_KEY is not set: nothing to encrypt with")
        report = rotate_all(busy_seconds=busy_seconds)
        audit_record(
            action="key_rotation", via="command", target_kind="storage", details=report.as_dict()
        )
        self.stdout.write(
            f"re-encrypted {report.objects} objects, {report.archive_segments} archive segments "
            f"and {report.journal_files} stream files"
        )
        if report.unreadable:
            self.stderr.write(
                f"{len(report.unreadable)} objects open with no configured key (left as they "
                "are; add the key they were written with to LCM_ENCRYPTION_OLD_KEYS): "
                + ", ".join(report.unreadable[:20])
            )
        if report.skipped_busy:
            self.stdout.write(
                f"skipped {len(report.skipped_busy)} stream files still in use; run again later"
            )
