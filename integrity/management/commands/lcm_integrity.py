"""manage.py lcm_integrity: report by default; plan or apply only when asked."""

from __future__ import annotations

import json

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from core.api.errors import LcmError
from core.progress import progress
from integrity.checks import CHECKS
from integrity.models import ScanMode, Trigger
from integrity.selectors import report_plans
from integrity.services import integrity_scan, repair_plan_apply


class Command(BaseCommand):
    help = (
        "Check lineage, context and file integrity. Without options: scan every conversation "
        "and print the report (nothing is changed). --plan also stores repair plans (still "
        "nothing is changed). --apply PLAN_ID applies one stored plan under the conversation "
        "lock and scans again."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--conversation", type=int, metavar="ID", help="Scan only this conversation."
        )
        parser.add_argument(
            "--plan", action="store_true", help="Also store repair plans (applied only on request)."
        )
        parser.add_argument(
            "--apply", type=int, metavar="PLAN_ID", help="Apply this stored repair plan."
        )
        parser.add_argument(
            "--user", metavar="USERNAME", help="Record this user as the one who applied the plan."
        )
        parser.add_argument("--json", action="store_true", help="Print the report as JSON.")
        parser.add_argument(
            "--fail-on-problems",
            action="store_true",
            help="Exit with status 1 when the scan (or the scan after --apply) found problems "
            "(for cron and monitoring).",
        )

    def handle(self, *args, **options):
        if options["apply"] is not None:
            return self._apply(options)
        mode = ScanMode.SCAN_AND_PLAN if options["plan"] else ScanMode.SCAN
        # Progress on stderr (a bar on a terminal, a few lines otherwise, none with --json).
        with progress(
            total=len(CHECKS), desc="Integrity checks", silent=options["json"], stream=self.stderr
        ) as bar:
            report = integrity_scan(
                conversation_id=options["conversation"],
                mode=mode,
                trigger=Trigger.COMMAND,
                on_check=lambda name: bar.advance(),
            )
        if options["json"]:
            self.stdout.write(json.dumps(_report_json(report), indent=2, default=str))
        else:
            self._print(report)
        self._exit_status(report, options)

    def _exit_status(self, report, options):
        if options["fail_on_problems"] and report.total_problems:
            raise SystemExit(1)

    def _apply(self, options):
        user = None
        if options["user"]:
            user = get_user_model().objects.filter(username=options["user"]).first()
            if user is None:
                raise CommandError(f"no user named {options['user']!r}")
        try:
            plan = repair_plan_apply(plan_id=options["apply"], user=user)
        except LcmError as error:
            raise CommandError(error.message) from error
        for line in plan.outcome or []:
            reason = f" ({line['reason']})" if line.get("reason") else ""
            self.stdout.write(f"  {line['action']}: {line['result']}{reason}")
        self.stdout.write(f"Applied plan {plan.pk}. After the repair:")
        self._print(plan.after_report)
        self._exit_status(plan.after_report, options)

    def _print(self, report):
        scope = (
            f"conversation {report.conversation_id}"
            if report.conversation_id
            else "all conversations"
        )
        self.stdout.write(
            f"Integrity report {report.pk} ({scope}): {report.total_problems} problem(s) "
            f"in {report.duration_ms:.0f} ms"
        )
        for check in report.checks:
            if check["count"]:
                self.stdout.write(f"  {check['name']}: {check['count']}")
                for example in check["examples"][:3]:
                    self.stdout.write(f"    {json.dumps(example, default=str)}")
        for plan in report_plans(report=report):
            automatic = sum(1 for a in plan.actions if a["automatic"])
            self.stdout.write(
                f"  plan {plan.pk} for conversation {plan.conversation_id}: "
                f"{automatic} automatic action(s), {len(plan.actions) - automatic} to review "
                f"(apply with --apply {plan.pk})"
            )


def _report_json(report) -> dict:
    return {
        "id": report.pk,
        "conversation_id": report.conversation_id,
        "total_problems": report.total_problems,
        "checks": report.checks,
        "plans": [
            {"id": p.pk, "conversation_id": p.conversation_id, "actions": p.actions}
            for p in report_plans(report=report)
        ],
    }
