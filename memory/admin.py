"""Read-only admin for memory rows (chunks and vectors are immutable)."""

from __future__ import annotations

from django.contrib import admin

from memory.models import Chunk, EmbeddingNamespace, RetrievalStats


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
    show_full_result_count = False


@admin.register(EmbeddingNamespace)
class EmbeddingNamespaceAdmin(ReadOnly):
    list_display = ("id", "model", "dim", "status", "chunks_done", "chunks_total")


@admin.register(RetrievalStats)
class RetrievalStatsAdmin(ReadOnly):
    list_display = ("turn_id", "disabled", "candidates", "selected", "packed_tokens")
    raw_id_fields = ("turn",)
    show_full_result_count = False
