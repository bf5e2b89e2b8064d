"""The audit log in the admin: read-only, filterable by action."""

from __future__ import annotations

from django.contrib import admin

from core.admin_base import ReadOnlyAdmin
from security.models import AuditEvent


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "action", "via", "actor_name", "target_kind", "target_id", "ip")
    list_filter = ("action", "via")
    search_fields = ("target_id", "actor_name")
    date_hierarchy = None
    readonly_fields = [f.name for f in AuditEvent._meta.fields]
