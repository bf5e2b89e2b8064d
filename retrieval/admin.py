"""Delegation grants in the admin: read-only (they are an audit trail of expansions)."""

from __future__ import annotations

from django.contrib import admin

from core.admin_base import ReadOnlyAdmin
from retrieval.models import DelegationGrant


@admin.register(DelegationGrant)
class DelegationGrantAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "owner",
        "conversation_ids",
        "tokens_used",
        "token_cap",
        "created_at",
        "expires_at",
        "revoked_at",
        "revoke_reason",
    )
    list_select_related = ("owner",)
    list_filter = ("revoke_reason",)
    search_fields = ("id", "prompt")
    raw_id_fields = ("owner",)
    ordering = ("-created_at",)
