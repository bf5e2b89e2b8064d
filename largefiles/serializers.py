"""Shapes of the large-file API."""

from __future__ import annotations

from rest_framework import serializers

from largefiles.models import LargeFile


class LargeFileSerializer(serializers.ModelSerializer):
    conversation_id = serializers.IntegerField()

    class Meta:
        model = LargeFile
        fields = [
            "id",
            "conversation_id",
            "file_name",
            "mime_type",
            "byte_size",
            "line_count",
            "token_count",
            "sha256",
            "tool_name",
            "exploration_summary",
            "created_at",
        ]
