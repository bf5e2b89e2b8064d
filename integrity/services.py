"""Integrity writes: store a scan (and its repair plans), and apply a plan.

Scans only read the canonical store. Applying a plan is the one write path: it takes the
conversation's compaction lock (no compaction pass interleaves) and the conversation row
lock appends use (no append interleaves), changes only the active context and counters,
records who applied it and what each action did, then scans the conversation again.
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.utils import timezone

from conversations.models import Conversation
from core import locks
from core.api.errors import Conflict, NotFound
from core.audit import audit_record
from integrity.checks import Scope
from integrity.models import CheckResult, IntegrityReport, PlanStatus, RepairPlan, ScanMode
from integrity.plans import plan_repairs
from integrity.repairs import apply_actions
from integrity.report import scan

logger = logging.getLogger("lcm.integrity")


def integrity_scan(
    *, conversation_id: int | None, mode: str, trigger: str, user=None, on_check=None
) -> IntegrityReport:
    """Run every check; store the report, and with scan_and_plan one plan per conversation
    that has problems. Returns the report (plans via `report.plans`). `on_check(name)` is
    called after each check (progress for the command)."""
    result = scan(Scope(conversation_id), on_check=on_check)
    with transaction.atomic():
        report = IntegrityReport.objects.create(
            conversation_id=conversation_id,
            mode=mode,
            trigger=trigger,
            requested_by=user if getattr(user, "is_authenticated", False) else None,
            total_problems=result.total_problems,
            checks=result.checks_json(),
            duration_ms=result.duration_ms,
        )
        CheckResult.objects.bulk_create(
            CheckResult(report=report, name=name, count=count)
            for name, count in result.counts().items()
        )
        if mode == ScanMode.SCAN_AND_PLAN:
            RepairPlan.objects.bulk_create(
                RepairPlan(report=report, conversation_id=cid, actions=actions)
                for cid, actions in sorted(plan_repairs(result).items())
            )
    if result.total_problems:
        logger.warning(
            "integrity scan found %d problem(s)",
            result.total_problems,
            extra={"conversation_id": conversation_id, "report_id": report.pk},
        )
    return report


def repair_plan_apply(*, plan_id: int, user=None) -> RepairPlan:
    """Apply a proposed plan once; a plan already applied (or being applied) is a conflict."""
    plan = RepairPlan.objects.filter(pk=plan_id).first()
    if plan is None:
        raise NotFound(f"repair plan {plan_id} not found")
    conversation_id = plan.conversation_id
    try:
        with transaction.atomic(durable=True):
            locks.try_lock(locks.LockKind.COMPACTION, conversation_id)
            Conversation.objects.select_for_update().filter(pk=conversation_id).first()
            claimed = RepairPlan.objects.filter(pk=plan_id, status=PlanStatus.PROPOSED).update(
                status=PlanStatus.APPLYING
            )
            if not claimed:
                status = RepairPlan.objects.values_list("status", flat=True).get(pk=plan_id)
                raise Conflict(
                    f"repair plan {plan_id} is {status}, not proposed",
                    extra={"plan_id": plan_id, "status": status},
                )
            outcome = apply_actions(conversation_id=conversation_id, actions=plan.actions)
            RepairPlan.objects.filter(pk=plan_id).update(
                status=PlanStatus.APPLIED,
                outcome=outcome,
                applied_by=user if getattr(user, "is_authenticated", False) else None,
                applied_at=timezone.now(),
            )
            audit_record(  # destructive actions are audited (ids and counts): core/audit.py
                action="integrity_repair",
                via="integrity",
                actor=user,
                target_kind="repair_plan",
                target_id=plan_id,
                details={"conversation_id": conversation_id, "actions": len(plan.actions)},
            )
    except Conflict:
        raise
    except Exception as error:
        RepairPlan.objects.filter(pk=plan_id, status=PlanStatus.PROPOSED).update(
            status=PlanStatus.FAILED, error=f"{type(error).__name__}: {error}"
        )
        raise
    after = integrity_scan(
        conversation_id=conversation_id, mode=ScanMode.SCAN, trigger="repair", user=user
    )
    RepairPlan.objects.filter(pk=plan_id).update(after_report=after)
    plan.refresh_from_db()
    logger.info(
        "applied repair plan %s: %d problem(s) remain",
        plan_id,
        after.total_problems,
        extra={"conversation_id": conversation_id},
    )
    return plan
