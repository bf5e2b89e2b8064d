"""Admin for the canonical store.

Canonical rows (messages, parts, summaries, lineage) are read-only here: no add, change
or delete. Big tables never count all rows (`show_full_result_count = False`) and use
raw id widgets instead of loading every related row into a select box.
"""

from __future__ import annotations

from django.contrib import admin
from django.utils import timezone

from conversations.models import (
    ContextItem,
    Conversation,
    Message,
    MessagePart,
    OwnerSecretPolicy,
    SecretFinding,
    Summary,
    SummaryMessage,
    SummaryParent,
)
from core.admin_base import ReadOnlyAdmin as BaseReadOnlyAdmin
from core.admin_paging import EstimatedCountPaginator


class ConversationIdFilter(admin.SimpleListFilter):
    """Filter by conversation: the 30 most recently active ones (a full list would not scale)."""

    title = "conversation"
    parameter_name = "conversation"

    def lookups(self, request, model_admin):
        recent = Conversation.objects.order_by("-updated_at").values_list("id", "session_id")[:30]
        return [(str(pk), f"#{pk} {session}") for pk, session in recent]

    def queryset(self, request, queryset):
        value = self.value()
        if value and value.isdigit():
            return queryset.filter(conversation_id=int(value))
        return queryset


class ReadOnlyAdmin(BaseReadOnlyAdmin):
    """Canonical rows are immutable: the admin can look, never touch. Their tables are the
    big ones, so pages estimate their count instead of counting every row."""

    paginator = EstimatedCountPaginator


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "session_id",
        "title",
        "owner",
        "last_seq",
        "token_budget",
        "updated_at",
    ]
    list_select_related = ["owner"]
    search_fields = ["session_id", "title"]
    list_filter = ["created_at"]
    raw_id_fields = ["owner"]
    readonly_fields = [
        "last_seq",
        "last_context_ordinal",
        "created_at",
        "updated_at",
    ]
    show_full_result_count = False

    def has_delete_permission(self, request, obj=None):
        return False  # deleting a conversation would delete canonical history


class MessagePartInline(ReadOnlyInline):
    model = MessagePart
    fields = ["ordinal", "part_type", "text_content", "tool_name", "tool_call_id", "tool_status"]


@admin.register(Message)
class MessageAdmin(ReadOnlyAdmin):
    list_display = ["id", "conversation", "seq", "role", "token_count", "created_at"]
    list_select_related = ["conversation"]
    list_filter = [ConversationIdFilter, "role"]
    search_fields = ["=conversation__id", "=external_id"]
    raw_id_fields = ["conversation"]
    inlines = [MessagePartInline]


@admin.register(MessagePart)
class MessagePartAdmin(ReadOnlyAdmin):
    list_display = ["id", "message", "ordinal", "part_type", "tool_name"]
    list_select_related = ["message"]
    list_filter = ["part_type"]  # parts have no conversation column; search by message id
    search_fields = ["=message__id", "=message__conversation__id", "=tool_call_id"]
    raw_id_fields = ["message"]


class SummaryMessageInline(ReadOnlyInline):
    model = SummaryMessage
    fk_name = "summary"
    fields = ["ordinal", "message"]
    raw_id_fields = ["message"]


class SummaryParentInline(ReadOnlyInline):
    model = SummaryParent
    fk_name = "summary"
    fields = ["ordinal", "parent_summary"]
    raw_id_fields = ["parent_summary"]
    verbose_name = "source summary"
    verbose_name_plural = "source summaries (summary_parents)"


@admin.register(Summary)
class SummaryAdmin(ReadOnlyAdmin):
    list_display = [
        "id",
        "conversation",
        "kind",
        "depth",
        "level",
        "token_count",
        "earliest_at",
        "latest_at",
    ]
    list_select_related = ["conversation"]
    list_filter = [ConversationIdFilter, "kind", "depth", "level"]
    search_fields = ["=id", "=conversation__id"]
    raw_id_fields = ["conversation"]
    inlines = [SummaryParentInline, SummaryMessageInline]


@admin.register(SummaryMessage)
class SummaryMessageAdmin(ReadOnlyAdmin):
    list_display = ["summary", "ordinal", "message", "conversation"]
    search_fields = ["=summary__id", "=conversation__id"]
    raw_id_fields = ["summary", "message", "conversation"]


@admin.register(SummaryParent)
class SummaryParentAdmin(ReadOnlyAdmin):
    list_display = ["summary", "ordinal", "parent_summary", "conversation"]
    search_fields = ["=summary__id", "=parent_summary__id", "=conversation__id"]
    raw_id_fields = ["summary", "parent_summary", "conversation"]


@admin.register(ContextItem)
class ContextItemAdmin(ReadOnlyAdmin):
    """The active context is rewritten only by compaction, never by hand."""

    list_display = ["conversation", "ordinal", "item_type", "message", "summary", "token_count"]
    list_filter = [ConversationIdFilter, "item_type"]
    search_fields = ["=conversation__id"]
    raw_id_fields = ["conversation", "message", "summary"]


@admin.register(SecretFinding)
class SecretFindingAdmin(ReadOnlyAdmin):
    """Secrets found at ingest: the review list (flagged ones not yet reviewed first)."""

    list_display = [
        "id", "conversation", "message", "kind", "location", "action", "created_at", "reviewed_at",
    ]  # fmt: skip
    list_select_related = ["conversation"]
    list_filter = ["action", ("reviewed_at", admin.EmptyFieldListFilter), "kind"]
    search_fields = ["=conversation__id", "=message__id"]
    raw_id_fields = ["conversation", "message", "reviewed_by"]
    actions = ["mark_reviewed"]

    @admin.action(description="Mark the selected findings as reviewed")
    def mark_reviewed(self, request, queryset):
        count = queryset.filter(reviewed_at__isnull=True).update(
            reviewed_at=timezone.now(), reviewed_by=request.user
        )
        self.message_user(request, f"{count} finding(s) marked as reviewed.")


@admin.register(OwnerSecretPolicy)
class OwnerSecretPolicyAdmin(admin.ModelAdmin):
    list_display = ["owner", "policy", "updated_at"]
    list_filter = ["policy"]
    raw_id_fields = ["owner"]
