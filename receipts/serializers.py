"""The receipts API's shapes (docs/receipts.md)."""

from __future__ import annotations

from rest_framework import serializers

from core.api.schema import ItemIdField


class ReceiptSummarySerializer(serializers.Serializer):
    """One call in a timeline: the figures, not the manifest."""

    id = serializers.CharField()
    conversation_id = serializers.IntegerField(allow_null=True)
    created_at = serializers.DateTimeField()
    site = serializers.CharField()
    wire = serializers.CharField()
    model = serializers.CharField()
    source = serializers.CharField()
    status = serializers.CharField()
    input_tokens = serializers.IntegerField(allow_null=True)
    output_tokens = serializers.IntegerField(allow_null=True)
    cache_read_tokens = serializers.IntegerField(allow_null=True)
    cache_write_tokens = serializers.IntegerField(allow_null=True)
    cost_usd = serializers.FloatField(allow_null=True)
    latency_ms = serializers.FloatField(allow_null=True)
    body_bytes = serializers.IntegerField()
    item_count = serializers.IntegerField()


class ReceiptItemSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    kind = serializers.CharField()
    id = ItemIdField()
    version = serializers.IntegerField()
    tokens = serializers.IntegerField()
    content_hash = serializers.CharField(allow_null=True)
    unchanged = serializers.BooleanField(
        help_text="False: the item changed since the call (a redaction)."
    )
    in_body = serializers.BooleanField(help_text="The item's text stands in the body sent.")
    body_order = serializers.IntegerField(allow_null=True)
    cache_mark_after = serializers.BooleanField()
    reason = serializers.CharField()
    why = serializers.CharField()
    about = serializers.DictField()


class ItemRefSerializer(serializers.Serializer):
    kind = serializers.CharField()
    id = ItemIdField()


class ReceiptResponseSerializer(serializers.Serializer):
    status = serializers.CharField()
    stop_reason = serializers.CharField(allow_null=True)
    error = serializers.CharField(allow_null=True)
    usage = serializers.DictField()
    latency_ms = serializers.FloatField(allow_null=True)
    cost_usd = serializers.FloatField(allow_null=True)


class ReceiptSerializer(serializers.Serializer):
    id = serializers.CharField()
    conversation_id = serializers.IntegerField(allow_null=True)
    created_at = serializers.DateTimeField()
    site = serializers.CharField()
    wire = serializers.CharField()
    model = serializers.CharField()
    upstream = serializers.CharField()
    source = serializers.CharField()
    parameters = serializers.DictField()
    cache_marks = serializers.IntegerField()
    body_bytes = serializers.IntegerField()
    body_digest = serializers.CharField()
    stored_bytes = serializers.IntegerField()
    record_microseconds = serializers.IntegerField(allow_null=True)
    budget = serializers.DictField()
    query = serializers.CharField()
    notes = serializers.DictField()
    items = ReceiptItemSerializer(many=True)
    item_tokens = serializers.IntegerField()
    left_out = ItemRefSerializer(many=True)
    response = ReceiptResponseSerializer()


class ReplaySerializer(serializers.Serializer):
    receipt_id = serializers.CharField()
    exact = serializers.BooleanField(help_text="The rebuilt body has the digest of the body sent.")
    note = serializers.CharField()
    changed = serializers.ListField(child=serializers.DictField())
    missing = serializers.ListField(child=serializers.DictField())
    body_bytes = serializers.IntegerField()
    body = serializers.JSONField(help_text="The body as JSON (`?as=raw` answers the bytes).")


class SummarizedSerializer(serializers.Serializer):
    summary_id = serializers.CharField()
    message_ids = serializers.ListField(child=serializers.IntegerField())
    summary_text = serializers.CharField()


class DiffItemSerializer(serializers.Serializer):
    kind = serializers.CharField()
    id = ItemIdField()
    index = serializers.IntegerField(required=False)
    reason = serializers.CharField(required=False)
    tokens = serializers.IntegerField(required=False)


class CacheBreakSerializer(serializers.Serializer):
    changed = serializers.BooleanField()
    byte = serializers.IntegerField(allow_null=True)
    item = DiffItemSerializer(allow_null=True)
    tokens_after = serializers.IntegerField()
    usage = serializers.DictField()
    previous_usage = serializers.DictField()


class DiffSerializer(serializers.Serializer):
    receipt_id = serializers.CharField()
    against_id = serializers.CharField()
    added = DiffItemSerializer(many=True)
    dropped = DiffItemSerializer(many=True)
    summarized = SummarizedSerializer(many=True)
    moved = DiffItemSerializer(many=True)
    cache = CacheBreakSerializer()
    tokens = serializers.DictField(child=serializers.IntegerField())
