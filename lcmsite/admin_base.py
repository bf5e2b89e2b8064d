"""Admin building blocks shared by the apps."""

from __future__ import annotations

from django.contrib import admin


class ReadOnlyAdmin(admin.ModelAdmin):
    """Records the admin can look at, never touch (canonical rows, reports, audit trails)."""

    show_full_result_count = False
    list_per_page = 100

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
