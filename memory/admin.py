"""Read-only admin for memory rows (chunks and vectors are immutable)."""

from __future__ import annotations

from django.contrib import admin

from core.api.errors import Unavailable
from memory.archived_unit_text import hydrate_chunks
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
