"""Print the LCM_* settings: the README table, or the values in force."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand

from core.config import SETTINGS, settings_table_markdown


class Command(BaseCommand):
    help = "Print every LCM_* setting: with --markdown the documentation table, else the values in force."

    def add_arguments(self, parser):
        parser.add_argument(
            "--markdown",
            action="store_true",
            help="Print the settings table as Markdown (for the README).",
        )

    def handle(self, *args, **options):
        if options["markdown"]:
            self.stdout.write(settings_table_markdown())
            return
        for setting in SETTINGS:
            self.stdout.write(f"{setting.name}={getattr(settings, setting.name)!r}")
