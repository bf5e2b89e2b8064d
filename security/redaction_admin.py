"""Redaction in the admin: "Redact the selected messages" on messages (each becomes the
marker, with everything derived from it, one job per conversation, queued for the
worker), and the jobs themselves, read-only, with their progress and "Resume" for one a
crash left unfinished; export jobs likewise, read-only."""

from __future__ import annotations

from collections import defaultdict

from django.contrib import admin, messages

from core.admin_base import ReadOnlyAdmin
from core.api.errors import LcmError
from security.models import ExportJob, Redaction, RedactionState
from security.redaction import jobs, queue
from security.redaction.request import parse, scope_of_conversation


@admin.action(description="Redact the selected messages (whole, with everything derived)")
def redact_messages(modeladmin, request, queryset):
    by_conversation: dict = defaultdict(list)
    for message in queryset.select_related("conversation"):
        by_conversation[message.conversation].append(message.pk)
    for conversation, ids in by_conversation.items():
        try:
            redaction = parse(
                {"message_ids": ids, "reason": "admin"}, scope_of_conversation(conversation)
            )
            row, _ = queue.submit(redaction, actor=request.user, via="admin")
        except LcmError as error:
            modeladmin.message_user(request, error.message, messages.ERROR)
            continue
        modeladmin.message_user(
            request,
            f"{row.pk}: redaction of {len(ids)} message(s) of conversation {conversation.pk} "
            "queued; Security → Redactions shows its progress and result.",
            messages.SUCCESS,
        )


@admin.register(Redaction)
class RedactionAdmin(ReadOnlyAdmin):
    list_display = (
        "id", "created_at", "state", "dry_run", "steps_done", "reason", "scope_kind",
        "scope_id", "actor_name",
    )  # fmt: skip
    list_filter = ("state", "scope_kind", "selector_kind")
    exclude = ("sealed",)
    readonly_fields = [f.name for f in Redaction._meta.fields if f.name != "sealed"]
    actions = ["resume"]

    @admin.display(description="steps done")
    def steps_done(self, row) -> str:
        progress = jobs.report(row)["progress"]
        return f"{progress['steps_done']}/{progress['steps_total']}"

    @admin.action(description="Resume the selected unfinished redactions")
    def resume(self, request, queryset):
        for row in queryset.exclude(state=RedactionState.DONE):
            jobs.resume(row.pk)
            self.message_user(request, f"{row.pk} resumed to the end.", messages.SUCCESS)

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(ExportJob)
class ExportJobAdmin(ReadOnlyAdmin):
    """Export archives built in the background: state, progress, size, when it expires."""

    list_display = (
        "id", "created_at", "state", "target_kind", "target_id", "progress_done",
        "progress_total", "size", "expires_at", "actor_name",
    )  # fmt: skip
    list_filter = ("state", "target_kind")
    readonly_fields = [f.name for f in ExportJob._meta.fields]

    def has_change_permission(self, request, obj=None):
        return False
