"""Admin for stored large files: read-only, like the canonical rows they belong to."""

from __future__ import annotations

from django.contrib import admin

from conversations.admin import ConversationIdFilter, ReadOnlyAdmin
from largefiles.models import LargeFile


@admin.register(LargeFile)
class LargeFileAdmin(ReadOnlyAdmin):
    list_display = [
        "id",
        "conversation",
        "file_name",
        "mime_type",
        "byte_size",
        "created_at",
    ]
    list_filter = [ConversationIdFilter, "mime_type"]
    search_fields = ["=id", "=conversation__id", "file_name"]
    raw_id_fields = ["conversation"]
