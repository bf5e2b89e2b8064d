"""Output shapes of the conversations API, and request shapes for the OpenAPI schema.

Request bodies are validated by `conversations.inputs` (one path for API and service
callers); the request serializers here document that contract in the schema.
"""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from conversations.inputs import DECIMAL_LIMIT, INT_MAX, INT_MIN, PART_FIELDS
from conversations.models import (
    ContextItem,
    Conversation,
    Message,
    MessagePart,
    PartType,
    Role,
    SecretFinding,
)
from core.api.requests import BLANK_PATTERN, RequestSerializer
from core.api.schema import cursor_page


class ConversationCreateSerializer(RequestSerializer):
    session_id = serializers.CharField(max_length=255)
    title = serializers.CharField(required=False, allow_blank=True, default="")
    token_budget = serializers.IntegerField(required=False, min_value=1, max_value=10_000_000)


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
            "from_archive",
        ]

    from_archive = serializers.SerializerMethodField(
        help_text="The content and parts were read back from an archive segment "
        "(docs/retention.md)."
    )

    def get_from_archive(self, message) -> bool:
        return message.archived_in is not None


@extend_schema_field(
    {
        "oneOf": [
            {
                "type": "number",
                "exclusiveMinimum": True,
                "minimum": -int(DECIMAL_LIMIT),
                "exclusiveMaximum": True,
                "maximum": int(DECIMAL_LIMIT),
            },
            {"type": "string", "pattern": r"^-?[0-9]{1,12}(\.[0-9]{1,8})?$"},
        ],
        "nullable": True,
    }
)
class DecimalInputField(serializers.JSONField):
    """A number, or a decimal string for an exact value (validated in conversations.inputs)."""


def _part_input_field(kind: str, limit: int | None) -> serializers.Field:
    """The schema field for one `inputs.PART_FIELDS` entry (validation stays in inputs)."""
    # null is "not given" for every part column (conversations.inputs skips it).
    if kind == "string":
        return serializers.CharField(
            required=False, allow_null=True, allow_blank=True, max_length=limit
        )
    if kind == "boolean":
        return serializers.BooleanField(required=False, allow_null=True)
    if kind == "integer":
        return serializers.IntegerField(
            required=False, allow_null=True, min_value=INT_MIN, max_value=INT_MAX
        )
    if kind == "number":
        return DecimalInputField(required=False, allow_null=True)
    if kind == "list of strings":
        return serializers.ListField(
            child=serializers.CharField(allow_blank=True), required=False, allow_null=True
        )
    if kind == "object":
        return serializers.DictField(required=False, allow_null=True)
    return serializers.JSONField(required=False, allow_null=True)


# Every part column a client may send, derived from the one table in conversations.inputs.
MessagePartInputSerializer = type(
    "MessagePartInputSerializer",
    (RequestSerializer,),
    {
        "part_type": serializers.ChoiceField(choices=PartType.choices),
        "ordinal": serializers.IntegerField(
            required=False,
            allow_null=True,
            min_value=0,
            max_value=INT_MAX,
            help_text="Assigned in order when omitted.",
        ),
        **{name: _part_input_field(kind, limit) for name, (kind, limit) in PART_FIELDS.items()},
    },
)


class MessageInputSerializer(RequestSerializer):
    role = serializers.ChoiceField(choices=Role.choices)
    content = serializers.CharField(
        required=False,
        allow_blank=True,
        allow_null=True,
        help_text="May be empty when parts are given.",
    )
    parts = MessagePartInputSerializer(
        many=True,
        required=False,
        allow_null=True,
        help_text="Every column of the spec's message_parts table is accepted.",
    )
    external_id = serializers.CharField(
        required=False,
        allow_null=True,
        max_length=255,
        help_text="Client id; re-sending it returns the stored message.",
    )
    created_at = serializers.DateTimeField(required=False, allow_null=True)

    # Not blank: text in content, or at least one part.
    schema_rules = {
        # Refused: blank (or null, or no) content together with no parts. Stated with
        # `not` so that generated clients, which read anyOf as a union, keep one model.
        "not": {"properties": {"content": {"pattern": BLANK_PATTERN}, "parts": {"maxItems": 0}}},
    }


class MessageBatchInputSerializer(RequestSerializer):
    messages = MessageInputSerializer(
        many=True, min_length=1, max_length=settings.LCM_MAX_BATCH_MESSAGES
    )


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


# --- secrets at ingest (docs/security.md, "Secrets at ingest") ---------------------------


class SecretPolicyInputSerializer(RequestSerializer):
    policy = serializers.ChoiceField(
        choices=["mask", "flag", "off"],
        allow_null=True,
        help_text="mask: secrets are replaced by [secret:<kind>] before anything is stored; "
        "flag: stored as sent and listed for review; off: not scanned; null: inherit.",
    )


class OwnerSecretPolicySerializer(serializers.Serializer):
    policy = serializers.CharField(allow_null=True, help_text="Your own policy (null: none).")
    server = serializers.CharField(help_text="LCM_SECRET_POLICY.")
    effective = serializers.CharField()


class ConversationSecretPolicySerializer(OwnerSecretPolicySerializer):
    owner = serializers.CharField(allow_null=True, help_text="The owner's policy (null: none).")


class SecretFindingSerializer(serializers.ModelSerializer):
    message_seq = serializers.IntegerField(source="message.seq", read_only=True)

    class Meta:
        model = SecretFinding
        fields = [
            "id", "conversation", "message", "message_seq", "kind", "location", "start", "end",
            "action", "created_at", "reviewed_at",
        ]  # fmt: skip


SecretFindingPageSerializer = cursor_page("SecretFindingPage", SecretFindingSerializer)
