"""Drop-in threads in the admin, read-only: which conversation a client key names, and
where a fork came from."""

from __future__ import annotations

from django.contrib import admin

from core.admin_base import ReadOnlyAdmin
from dropin.models import Thread


@admin.register(Thread)
class ThreadAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "key",
        "owner",
        "conversation",
        "model",
        "message_count",
        "active",
        "parent",
        "fork_position",
        "updated_at",
    )
    list_select_related = ("owner", "conversation", "parent")
    raw_id_fields = ("owner", "conversation", "parent")
    search_fields = ("=key", "=conversation__id")
    list_filter = ("active", "model")
