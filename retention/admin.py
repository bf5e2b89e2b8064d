"""Admin for retention policies (per user, per conversation). Saving goes through
`retention.services.policy_set`, so a change of the deletion policy is audited."""

from __future__ import annotations

from django.contrib import admin

from retention import services
from retention.models import RetentionPolicy
from retention.policies import FIELDS, server_policy


@admin.register(RetentionPolicy)
class RetentionPolicyAdmin(admin.ModelAdmin):
    list_display = ["id", "user", "conversation", "archive_after_days", "keep_newest_tokens",
                    "delete_after_days", "archived_vectors", "archived_fulltext",
                    "updated_at"]  # fmt: skip
    raw_id_fields = ["user", "conversation"]
    list_select_related = ["user", "conversation"]

    def changelist_view(self, request, extra_context=None):
        extra_context = {**(extra_context or {}), "title": (
            f"Retention policies (server default: {server_policy().as_dict()})"
        )}  # fmt: skip
        return super().changelist_view(request, extra_context=extra_context)

    def save_model(self, request, obj, form, change):
        values = {name: getattr(obj, name) for name in FIELDS}
        saved = services.policy_set(user=obj.user, conversation=obj.conversation,
                                    values=values, actor=request.user)  # fmt: skip
        obj.pk = saved.pk
