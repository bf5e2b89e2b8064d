from __future__ import annotations

from rest_framework import serializers

from core.api.requests import RequestSerializer


class HardDeleteResultSerializer(serializers.Serializer):
    conversation_ids = serializers.ListField(child=serializers.IntegerField())
    session_ids = serializers.ListField(child=serializers.CharField())
    rows = serializers.DictField(
        child=serializers.IntegerField(), help_text="Rows deleted per model (`app.Model`)."
    )
    files = serializers.IntegerField(help_text="Stored file objects removed.")
    journals = serializers.IntegerField(help_text="Stream journals and turn event logs removed.")

    class Meta:
        ref_name = "HardDeleteResult"


class ExportRequestSerializer(RequestSerializer):
    conversation_id = serializers.IntegerField(required=False, min_value=1)
    session_id = serializers.CharField(required=False, max_length=64)

    schema_rules = {"oneOf": [{"required": ["conversation_id"]}, {"required": ["session_id"]}]}

    class Meta:
        ref_name = "ExportRequest"

    def validate(self, attrs):
        if ("conversation_id" in attrs) == ("session_id" in attrs):
            raise serializers.ValidationError("give exactly one of conversation_id, session_id")
        return attrs
