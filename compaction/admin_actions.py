"""Admin action on conversations: queue a manual full compaction for each selected one."""

from __future__ import annotations

from django.contrib import admin, messages

from compaction.models import Mode, Reason
from compaction.services import job_request


@admin.action(description="Compact now")
def compact_now(modeladmin, request, queryset):
    queued = already = 0
    for conversation in queryset:
        _, created = job_request(conversation=conversation, reason=Reason.MANUAL, mode=Mode.FULL)
        queued += created
        already += not created
    modeladmin.message_user(
        request,
        f"Queued {queued} compaction job(s); {already} already had one pending.",
        messages.SUCCESS,
    )
