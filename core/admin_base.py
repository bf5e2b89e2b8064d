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


def extend_admin(model, *, actions=(), columns=()) -> None:
    """Add what a higher app offers to the admin of a lower app's model: `actions` (admin
    actions) and `columns` (display callables, shown last in the list and on the page).

    Called from the higher app's `AppConfig.ready()`, after the admin registered every
    ModelAdmin, so that a lower app's admin module never imports a higher app (the
    compaction app adds "Compact now" to conversations; the explorer adds its links)."""
    model_admin = admin.site._registry[model]
    if actions:
        model_admin.actions = [*(model_admin.actions or ()), *actions]
    if columns:
        model_admin.list_display = [*model_admin.list_display, *columns]
        model_admin.readonly_fields = [*model_admin.readonly_fields, *columns]
