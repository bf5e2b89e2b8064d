"""Admin for integrity reports and repair plans: read-only records (applying a plan is a
deliberate action through `manage.py lcm_integrity --apply` or the API, never a form)."""

from __future__ import annotations

from django.contrib import admin

from core.admin_base import ReadOnlyAdmin
from integrity.models import CheckResult, IntegrityJob, IntegrityReport, RepairPlan


class CheckResultInline(admin.TabularInline):
    model = CheckResult
    extra = 0
    can_delete = False
    fields = ["name", "count"]
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(IntegrityReport)
class IntegrityReportAdmin(ReadOnlyAdmin):
    list_display = ["id", "created_at", "conversation", "mode", "trigger", "total_problems"]
    list_filter = ["mode", "trigger"]
    list_select_related = ["conversation"]
    raw_id_fields = ["conversation", "requested_by"]
    readonly_fields = [
        "conversation",
        "mode",
        "trigger",
        "requested_by",
        "total_problems",
        "checks",
        "duration_ms",
        "created_at",
    ]
    inlines = [CheckResultInline]


@admin.register(RepairPlan)
class RepairPlanAdmin(ReadOnlyAdmin):
    list_display = ["id", "created_at", "conversation", "status", "applied_by", "applied_at"]
    list_filter = ["status"]
    list_select_related = ["conversation", "applied_by"]
    raw_id_fields = ["report", "conversation", "applied_by", "after_report"]
    readonly_fields = [
        "report",
        "conversation",
        "status",
        "actions",
        "created_at",
        "applied_by",
        "applied_at",
        "outcome",
        "error",
        "after_report",
    ]


@admin.register(IntegrityJob)
class IntegrityJobAdmin(ReadOnlyAdmin):
    list_display = ["id", "created_at", "conversation", "mode", "state", "attempts", "report"]
    list_filter = ["state", "mode"]
    list_select_related = ["conversation"]
    raw_id_fields = ["conversation", "report"]
    readonly_fields = [
        "conversation",
        "mode",
        "state",
        "attempts",
        "lease_until",
        "report",
        "error",
        "created_at",
        "finished_at",
    ]
