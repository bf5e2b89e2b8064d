"""Admin for archive segments: read-only (archiving and restoring go through
`manage.py lcm_retention`, never a form), with their ranges and sizes."""

from __future__ import annotations

from django.contrib import admin

from archive.models import Segment
from core.admin_base import ReadOnlyAdmin


@admin.register(Segment)
class SegmentAdmin(ReadOnlyAdmin):
    list_display = ["id", "conversation", "seq_from", "seq_to", "message_count", "state",
                    "codec", "encrypted", "raw_bytes", "stored_bytes", "ratio", "created_at"]  # fmt: skip
    list_filter = ["state", "codec", "encrypted"]
    list_select_related = ["conversation"]
    search_fields = ["key"]
    readonly_fields = ["conversation", "seq_from", "seq_to", "message_count", "key", "codec",
                       "encrypted", "stored_bytes", "raw_bytes", "sha256", "state",
                       "created_at", "restored_at"]  # fmt: skip
    exclude = ["message_hashes"]

    @admin.display(description="compression")
    def ratio(self, segment: Segment) -> str:
        return f"{segment.raw_bytes / max(1, segment.stored_bytes):.1f}x"
