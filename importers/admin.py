"""Admin: import jobs and import sources, read-only records."""

from __future__ import annotations

from django.contrib import admin

from core.admin_base import ReadOnlyAdmin
from importers.models import ImportedConversation, ImportJob


@admin.register(ImportJob)
class ImportJobAdmin(ReadOnlyAdmin):
    list_display = ["id", "created_at", "owner", "format", "state", "progress_done"]
    list_filter = ["format", "state"]
    list_select_related = ["owner"]
    raw_id_fields = ["owner"]


@admin.register(ImportedConversation)
class ImportedConversationAdmin(ReadOnlyAdmin):
    list_display = ["conversation", "format", "source_key", "imported_at"]
    list_filter = ["format"]
    list_select_related = ["conversation"]
    raw_id_fields = ["conversation"]
