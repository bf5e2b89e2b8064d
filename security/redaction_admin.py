"""Redaction in the admin: "Redact the selected messages" on messages (each becomes the
marker, with everything derived from it, one job per conversation), and the jobs
themselves, read-only, with "Resume" for one a crash left unfinished."""

from __future__ import annotations

from collections import defaultdict

from django.contrib import admin, messages

from core.admin_base import ReadOnlyAdmin
from core.api.errors import LcmError
from security.models import Redaction, RedactionState
from security.redaction import jobs
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
            row = jobs.start(redaction, actor=request.user, via="admin", http_request=request)
        except LcmError as error:
            modeladmin.message_user(request, error.message, messages.ERROR)
            continue
        found = row.verification.get("occurrences")
        modeladmin.message_user(
            request,
            f"{row.pk}: {len(ids)} message(s) of conversation {conversation.pk} redacted; "
            f"verify found {found} occurrence(s).",
            messages.SUCCESS if found == 0 else messages.WARNING,
        )


@admin.register(Redaction)
class RedactionAdmin(ReadOnlyAdmin):
    list_display = ("id", "created_at", "state", "reason", "scope_kind", "scope_id", "actor_name")
    list_filter = ("state", "scope_kind", "selector_kind")
    exclude = ("sealed",)
    readonly_fields = [f.name for f in Redaction._meta.fields if f.name != "sealed"]
    actions = ["resume"]

    @admin.action(description="Resume the selected unfinished redactions")
    def resume(self, request, queryset):
        for row in queryset.exclude(state=RedactionState.DONE):
            jobs.resume(row.pk)
            self.message_user(request, f"{row.pk} resumed to the end.", messages.SUCCESS)

    def has_change_permission(self, request, obj=None):
        return False
