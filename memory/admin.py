"""Read-only admin for memory rows (chunks and vectors are immutable)."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import F

from core.api.errors import Unavailable
from memory.archived_unit_text import hydrate_chunks
from memory.index_lag import indexing_lag
from memory.models import Chunk, EmbeddingNamespace, MessageIndexCursor, RetrievalStats


class ReadOnly(admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Chunk)
class ChunkAdmin(ReadOnly):
    list_display = ("id", "chunk_type", "conversation_id", "seq_start", "seq_end", "token_est")
    list_filter = ("chunk_type",)
    raw_id_fields = ("conversation", "session", "branch", "source_turn")
    readonly_fields = ("text_read_back",)
    show_full_result_count = False

    @admin.display(description="text (read back from the archive when retention moved it)")
    def text_read_back(self, obj: Chunk) -> str:
        try:
            return hydrate_chunks([obj])[0].rendered_text
        except Unavailable as error:  # a missing segment: say so, as the API's 503 does
            return f"({error})"


@admin.register(EmbeddingNamespace)
class EmbeddingNamespaceAdmin(ReadOnly):
    list_display = ("id", "model", "dim", "status", "chunks_done", "chunks_total")


@admin.register(RetrievalStats)
class RetrievalStatsAdmin(ReadOnly):
    list_display = ("turn_id", "disabled", "candidates", "selected", "packed_tokens")
    raw_id_fields = ("turn",)
    show_full_result_count = False


class BehindFilter(admin.SimpleListFilter):
    title = "indexing"
    parameter_name = "behind"

    def lookups(self, request, model_admin):
        return (("yes", "behind"), ("no", "caught up"))

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.filter(last_seq__lt=F("conversation__last_seq"))
        if self.value() == "no":
            return queryset.filter(last_seq__gte=F("conversation__last_seq"))
        return queryset


@admin.register(MessageIndexCursor)
class MessageIndexCursorAdmin(ReadOnly):
    """Indexing progress per conversation; the page title says how far indexing is behind
    in all (the same figures as /metrics)."""

    list_display = (
        "conversation_id",
        "last_seq",
        "conversation_last_seq",
        "messages_behind",
        "behind_since",
        "queued_at",
        "lease_until",
    )
    list_filter = (BehindFilter,)
    raw_id_fields = ("conversation",)
    show_full_result_count = False

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .annotate(conversation_last=F("conversation__last_seq"))
            .order_by(F("behind_since").asc(nulls_last=True), "conversation_id")
        )

    @admin.display(description="conversation's last seq", ordering="conversation_last")
    def conversation_last_seq(self, obj) -> int:
        return obj.conversation_last

    @admin.display(description="messages behind")
    def messages_behind(self, obj) -> int:
        return max(0, obj.conversation_last - obj.last_seq)

    def changelist_view(self, request, extra_context=None):
        lag = indexing_lag()
        title = (
            f"Indexing: {lag.conversations} conversation(s) behind, {lag.messages} message(s) "
            f"not indexed, oldest unindexed message {lag.oldest_seconds:.0f} s old"
        )
        return super().changelist_view(request, {**(extra_context or {}), "title": title})
