"""Request and response shapes of the memory API (uniquely named for the schema)."""

from __future__ import annotations

from rest_framework import serializers

from core.api.requests import RequestSerializer
from retrieval.grep import MAX_QUERY_CHARS


class MemoryRetrieveInputSerializer(RequestSerializer):
    query = serializers.CharField(max_length=MAX_QUERY_CHARS)
    top_k = serializers.IntegerField(min_value=1, max_value=50, required=False, allow_null=True)
    mode = serializers.ChoiceField(
        choices=["hybrid", "semantic", "full_text"], default="hybrid", required=False
    )


class MemoryProvenanceSerializer(serializers.Serializer):
    conversation_id = serializers.IntegerField()
    session_id = serializers.CharField(allow_null=True)
    branch_id = serializers.CharField(allow_null=True)
    source_turn_id = serializers.CharField(allow_null=True)
    seq_start = serializers.IntegerField()
    seq_end = serializers.IntegerField()
    start_offset = serializers.IntegerField()
    end_offset = serializers.IntegerField()
    created_at = serializers.DateTimeField(
        help_text="When the source message (or turn) was recorded."
    )


class MemoryChunkItemSerializer(serializers.Serializer):
    chunk_id = serializers.CharField()
    chunk_type = serializers.CharField()
    text = serializers.CharField()
    summary = serializers.CharField()
    tokens = serializers.IntegerField()
    similarity = serializers.FloatField(help_text="Calibrated similarity to the query, 0..1.")
    score = serializers.FloatField(
        help_text="Fused relevance (BM25 and cosine, z-scored); ranks within one search only."
    )
    rank = serializers.IntegerField()
    matched_by = serializers.CharField(help_text="vector, full_text or both")
    provenance = MemoryProvenanceSerializer()


class MemoryRetrieveResponseSerializer(serializers.Serializer):
    results = MemoryChunkItemSerializer(many=True)
    stats = serializers.DictField(
        help_text="mode, namespace, units (in scope), selected, elapsed_ms; order_of_events "
        "({topic, own_words}) when the query asks in what order things happened"
    )


class MemoryChunkRowSerializer(serializers.Serializer):
    id = serializers.CharField()
    chunk_type = serializers.CharField()
    summary = serializers.CharField()
    text = serializers.CharField()
    tokens = serializers.IntegerField()
    conversation_id = serializers.IntegerField()
    source_turn_id = serializers.CharField(allow_null=True)
    seq_start = serializers.IntegerField()
    seq_end = serializers.IntegerField()
    created_at = serializers.DateTimeField()


class MemoryChunkListResponseSerializer(serializers.Serializer):
    results = MemoryChunkRowSerializer(many=True)
