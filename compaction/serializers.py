"""Request and response shapes of the compaction API (named uniquely for the schema)."""

from __future__ import annotations

from rest_framework import serializers

from compaction.models import CompactionJob, Mode
from core.api.requests import RequestSerializer
from core.api.schema import ItemIdField


class CompactRequestSerializer(RequestSerializer):
    mode = serializers.ChoiceField(choices=Mode.choices, default=Mode.FULL)
    target_tokens = serializers.IntegerField(required=False, min_value=0, max_value=100_000_000)
    wait = serializers.BooleanField(required=False, default=False)


class CompactionResultSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["compacted", "nothing_to_do", "failed"])
    summaries_created = serializers.ListField(child=serializers.CharField())
    tokens_before = serializers.IntegerField()
    tokens_after = serializers.IntegerField()
    passes = serializers.IntegerField()
    run_id = serializers.IntegerField(allow_null=True)
    detail = serializers.CharField()
    error_code = serializers.CharField(allow_null=True)
    levels = serializers.DictField(child=serializers.IntegerField())


class CompactionJobSerializer(serializers.ModelSerializer):
    conversation_id = serializers.IntegerField(read_only=True)
    run_id = serializers.IntegerField(read_only=True, allow_null=True)
    result = CompactionResultSerializer(read_only=True, allow_null=True)

    class Meta:
        model = CompactionJob
        fields = [
            "id",
            "conversation_id",
            "reason",
            "mode",
            "target_tokens",
            "state",
            "run_id",
            "result",
            "error",
            "attempts",
            "created_at",
            "started_at",
            "finished_at",
        ]


class AssembleRequestSerializer(RequestSerializer):
    token_budget = serializers.IntegerField(required=False, min_value=1, max_value=10_000_000)
    system = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    format = serializers.ChoiceField(
        choices=["neutral", "anthropic", "openai"], required=False, default="neutral"
    )
    split_summaries = serializers.BooleanField(
        required=False,
        default=False,
        help_text=(
            "Return the leading summaries apart, in `summaries`, and only what follows them in "
            "`messages`: put them after your system prompt, before the messages, and mark the "
            "end of each for your provider's prompt cache (docs/cost.md)."
        ),
    )


class AssembledItemSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["message", "summary"])
    ordinal = serializers.IntegerField()
    id = ItemIdField(help_text="A message id (integer) or a summary id (sum_..., string).")
    seq = serializers.IntegerField(required=False)
    role = serializers.CharField(required=False)
    kind = serializers.CharField(required=False)
    depth = serializers.IntegerField(required=False)
    tokens = serializers.IntegerField()


class AssembledContextSerializer(serializers.Serializer):
    format = serializers.CharField()
    token_budget = serializers.IntegerField()
    token_estimate = serializers.IntegerField()
    system = serializers.CharField(
        required=False, allow_null=True, help_text="neutral and anthropic formats"
    )
    messages = serializers.ListField(
        child=serializers.DictField(),
        help_text="Model input messages in the requested format, chronological.",
    )
    summaries = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="With split_summaries: the leading summaries' XML, oldest first.",
    )
    items = AssembledItemSerializer(many=True)
    dropped = AssembledItemSerializer(many=True)
