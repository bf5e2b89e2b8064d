from __future__ import annotations

from rest_framework import serializers

from core.api.requests import RequestSerializer


class PolicyInputSerializer(RequestSerializer):
    archive_after_days = serializers.IntegerField(
        min_value=0, max_value=36500, allow_null=True, required=False,
        help_text="Archive raw content older than this many days (0: not by age; null: inherit).",
    )  # fmt: skip
    keep_newest_tokens = serializers.IntegerField(
        min_value=0, max_value=10**12, allow_null=True, required=False,
        help_text="Archive raw content beyond the newest N tokens (0: not by size; null: inherit).",
    )  # fmt: skip
    delete_after_days = serializers.IntegerField(
        min_value=0, max_value=36500, allow_null=True, required=False,
        help_text="Hard-delete a conversation idle this many days (0: never; null: inherit). "
        "Audited; runs only through the retention job or `lcm_retention apply --delete`.",
    )  # fmt: skip
    archived_vectors = serializers.ChoiceField(
        choices=["keep", "float16", "int8"], allow_null=True, required=False,
        help_text="Memory vectors of archived content: keep (float32) or compress (lossy; "
        "null: inherit).",
    )  # fmt: skip
    archived_fulltext = serializers.ChoiceField(
        choices=["keep", "drop", "archive"], allow_null=True, required=False,
        help_text="Memory full-text rows of archived content: keep, drop, or drop and move "
        "the memory units' text to the archive (read back from there; null: inherit).",
    )  # fmt: skip


class PolicyValuesSerializer(serializers.Serializer):
    archive_after_days = serializers.IntegerField(allow_null=True)
    keep_newest_tokens = serializers.IntegerField(allow_null=True)
    delete_after_days = serializers.IntegerField(allow_null=True)
    archived_vectors = serializers.CharField(allow_null=True)
    archived_fulltext = serializers.CharField(allow_null=True)


class EffectivePolicySerializer(serializers.Serializer):
    archive_after_days = serializers.IntegerField()
    keep_newest_tokens = serializers.IntegerField()
    delete_after_days = serializers.IntegerField()
    archived_vectors = serializers.CharField()
    archived_fulltext = serializers.CharField()
    source = serializers.DictField(
        child=serializers.ChoiceField(choices=["server", "user", "conversation"]),
        help_text="Where each value comes from.",
    )


class SegmentSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    seq_from = serializers.IntegerField()
    seq_to = serializers.IntegerField()
    message_count = serializers.IntegerField()
    codec = serializers.CharField()
    encrypted = serializers.BooleanField()
    stored_bytes = serializers.IntegerField()
    raw_bytes = serializers.IntegerField()
    created_at = serializers.DateTimeField()


class UserPolicyResponseSerializer(serializers.Serializer):
    policy = PolicyValuesSerializer(allow_null=True, help_text="Your own policy (null: none).")
    server = EffectivePolicySerializer()


class ConversationRetentionSerializer(serializers.Serializer):
    conversation_id = serializers.IntegerField()
    policy = PolicyValuesSerializer(allow_null=True, help_text="This conversation's own policy.")
    effective = EffectivePolicySerializer()
    archived_messages = serializers.IntegerField()
    archived_ranges = SegmentSerializer(many=True, help_text="Active segments, in seq order.")
