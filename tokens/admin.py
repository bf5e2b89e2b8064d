"""API tokens in the admin: listed and revocable, never created there (a key is shown
once, by `manage.py lcm_token issue`). DRF's own token admin is removed: it would store
keys in plain text."""

from __future__ import annotations

from django.contrib import admin
from rest_framework.authtoken.models import TokenProxy

from tokens.models import ApiToken
from tokens.services import token_revoke

if admin.site.is_registered(TokenProxy):
    admin.site.unregister(TokenProxy)


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = (
        "prefix",
        "name",
        "user",
        "created_at",
        "expires_at",
        "last_used_at",
        "revoked_at",
        "legacy",
    )
    list_select_related = ("user",)
    list_filter = ("legacy",)
    search_fields = ("prefix", "name", "user__username")
    raw_id_fields = ("user",)
    readonly_fields = [f.name for f in ApiToken._meta.fields if f.name != "digest"]
    exclude = ("digest",)
    actions = ["revoke"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset):
        revoked = sum(
            token_revoke(token=token, via="admin", actor=request.user) for token in queryset
        )
        self.message_user(request, f"{revoked} token(s) revoked.")
