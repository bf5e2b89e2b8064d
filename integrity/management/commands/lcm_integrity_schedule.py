"""manage.py lcm_integrity_schedule: create (or update, or remove) the periodic integrity job."""

from __future__ import annotations

from django.core.management.base import BaseCommand
from django_q.models import Schedule

from integrity.models import ScanMode

SCHEDULE_NAME = "lcm-integrity"


class Command(BaseCommand):
    help = (
        "Schedule the background integrity job (django-q2; runs in `manage.py qcluster`). "
        "Idempotent: running it again updates the one schedule. --remove deletes it."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--mode",
            choices=ScanMode.values,
            default=ScanMode.SCAN,
            help="scan (report only) or scan_and_plan (also store repair plans). Default: scan.",
        )
        parser.add_argument(
            "--minutes", type=int, default=1440, help="Minutes between runs (default: daily)."
        )
        parser.add_argument("--remove", action="store_true", help="Remove the schedule.")

    def handle(self, *args, **options):
        if options["remove"]:
            deleted, _ = Schedule.objects.filter(name=SCHEDULE_NAME).delete()
            self.stdout.write("Removed the integrity schedule." if deleted else "No schedule.")
            return
        if options["minutes"] < 1:
            self.stderr.write("--minutes must be at least 1")
            raise SystemExit(2)
        schedule, created = Schedule.objects.update_or_create(
            name=SCHEDULE_NAME,
            defaults={
                "func": "integrity.tasks.integrity_job",
                "kwargs": repr({"mode": options["mode"]}),
                "schedule_type": Schedule.MINUTES,
                "minutes": options["minutes"],
                "repeats": -1,
            },
        )
        verb = "Created" if created else "Updated"
        self.stdout.write(
            f"{verb} schedule {schedule.name!r}: {options['mode']} every {options['minutes']} min."
        )
