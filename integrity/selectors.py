"""Reads of integrity reports and plans."""

from __future__ import annotations

from django.db.models import QuerySet

from integrity.models import IntegrityReport, RepairPlan


def report_plans(*, report: IntegrityReport) -> QuerySet[RepairPlan]:
    return (
        RepairPlan.objects.filter(report=report)
        .order_by("conversation_id")
        .select_related("applied_by")
    )


def plan_get(*, plan_id: int) -> RepairPlan | None:
    return RepairPlan.objects.filter(pk=plan_id).select_related("conversation").first()
