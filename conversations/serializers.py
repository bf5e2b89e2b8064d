"""Output shapes of the conversations API, and request shapes for the OpenAPI schema.

Request bodies are validated by `conversations.inputs` (one path for API and service
callers); the request serializers here document that contract in the schema.
"""

from __future__ import annotations

from rest_framework import serializers

from conversations.inputs import INT_MAX, INT_MIN, PART_FIELDS
from conversations.models import ContextItem, Conversation, Message, MessagePart, PartType, Role
from lcmsite.api.schema import cursor_page


class ConversationCreateSerializer(serializers.Serializer):
    session_id = serializers.CharField(max_length=255)
    title = serializers.CharField(required=False, allow_blank=True, default="")
    token_budget = serializers.IntegerField(required=False, min_value=1, max_value=10_000_000)

    def validate(self, attrs):
        # A misspelt optional field (token_budge) must not silently fall back to a default.
        unknown = sorted(set(self.initial_data) - set(self.fields))
        if unknown:
            raise serializers.ValidationError({name: ["unknown field"] for name in unknown})
        return attrs


class SummaryCountsSerializer(serializers.Serializer):
    leaf = serializers.IntegerField()
    condensed = serializers.IntegerField()


class ConversationSerializer(serializers.ModelSerializer):
    owner = serializers.CharField(source="owner.username", read_only=True)

    class Meta:
        model = Conversation
        fields = ["id", "session_id", "title", "token_budget", "owner", "created_at", "updated_at"]


class ConversationDetailSerializer(ConversationSerializer):
    message_count = serializers.IntegerField()
    context_item_count = serializers.IntegerField()
    context_tokens = serializers.IntegerField()
    summaries = SummaryCountsSerializer()

    class Meta(ConversationSerializer.Meta):
        fields = [
            *ConversationSerializer.Meta.fields,
            "message_count",
            "context_item_count",
            "context_tokens",
            "summaries",
        ]


class MessagePartSerializer(serializers.ModelSerializer):
    class Meta:
        model = MessagePart
        fields = ["part_type", "ordinal", *PART_FIELDS]

    def to_representation(self, instance):
        data = super().to_representation(instance)
        return {key: value for key, value in data.items() if value is not None}


class MessageSerializer(serializers.ModelSerializer):
    parts = MessagePartSerializer(many=True, read_only=True)

    class Meta:
        model = Message
        fields = [
            "id",
            "seq",
            "role",
            "content",
            "token_count",
            "created_at",
            "external_id",
            "file_ids",
            "parts",
        ]


def _part_input_field(kind: str, limit: int | None) -> serializers.Field:
    """The schema field for one `inputs.PART_FIELDS` entry (validation stays in inputs)."""
    if kind == "string":
        return serializers.CharField(required=False, max_length=limit)
    if kind == "boolean":
        return serializers.BooleanField(required=False)
    if kind == "integer":
        return serializers.IntegerField(required=False, min_value=INT_MIN, max_value=INT_MAX)
    if kind == "number":
        return serializers.FloatField(required=False)
    if kind == "list of strings":
        return serializers.ListField(child=serializers.CharField(), required=False)
    if kind == "object":
        return serializers.DictField(required=False)
    return serializers.JSONField(required=False)


# Every part column a client may send, derived from the one table in conversations.inputs.
MessagePartInputSerializer = type(
    "MessagePartInputSerializer",
    (serializers.Serializer,),
    {
        "part_type": serializers.ChoiceField(choices=PartType.choices),
        "ordinal": serializers.IntegerField(
            required=False, min_value=0, help_text="Assigned in order when omitted."
        ),
        **{name: _part_input_field(kind, limit) for name, (kind, limit) in PART_FIELDS.items()},
    },
)


class MessageInputSerializer(serializers.Serializer):
    role = serializers.ChoiceField(choices=Role.choices)
    content = serializers.CharField(
        required=False, allow_blank=True, help_text="May be empty when parts are given."
    )
    parts = MessagePartInputSerializer(
        many=True,
        required=False,
        help_text="Every column of the spec's message_parts table is accepted.",
    )
    external_id = serializers.CharField(
        required=False,
        max_length=255,
        help_text="Client id; re-sending it returns the stored message.",
    )
    created_at = serializers.DateTimeField(required=False)


class MessageBatchInputSerializer(serializers.Serializer):
    messages = MessageInputSerializer(many=True)


class AppendedMessageSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    seq = serializers.IntegerField()
    token_count = serializers.IntegerField()
    created = serializers.BooleanField(help_text="False when the external_id was already stored.")


class AppendedBatchSerializer(serializers.Serializer):
    messages = AppendedMessageSerializer(many=True)


class ContextItemSerializer(serializers.ModelSerializer):
    class Meta:
        model = ContextItem
        fields = ["ordinal", "item_type", "message_id", "summary_id", "token_count"]


ConversationPageSerializer = cursor_page("ConversationPageSerializer", ConversationSerializer)
MessagePageSerializer = cursor_page("MessagePageSerializer", MessageSerializer)
ContextItemPageSerializer = cursor_page("ContextItemPageSerializer", ContextItemSerializer)
