from __future__ import annotations

from rest_framework import serializers

from core.api.requests import RequestSerializer
from core.api.schema import cursor_page
from importers.exporters import FORMATS
from importers.models import Format, ImportJob
from importers.watch.mirror import PATH_PATTERN


class ImportUploadSerializer(RequestSerializer):
    file = serializers.FileField(
        allow_empty_file=True,  # an empty file imports nothing; its job reports it
        help_text="The transcript or lossless-claw database to import.",
    )
    format = serializers.ChoiceField(choices=Format.values)
    session_id = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=255,
        help_text="Conversation session id (transcripts; default: from the file).",
    )
    dry_run = serializers.BooleanField(
        required=False, default=False, help_text="Count what would be imported; write nothing."
    )

    class Meta:
        ref_name = "ImportUpload"


class ImportLineErrorSerializer(serializers.Serializer):
    line = serializers.IntegerField(allow_null=True)
    message = serializers.CharField()

    class Meta:
        ref_name = "ImportLineError"


class ImportProgressSerializer(serializers.Serializer):
    done = serializers.IntegerField()
    total = serializers.IntegerField(allow_null=True)

    class Meta:
        ref_name = "ImportProgress"


class ImportJobSerializer(serializers.ModelSerializer):
    progress = serializers.SerializerMethodField()
    errors = ImportLineErrorSerializer(many=True)
    result = serializers.JSONField(
        allow_null=True,
        help_text="The import report once finished: totals and, per conversation, rows "
        "written per table and problems.",
    )

    class Meta:
        model = ImportJob
        ref_name = "ImportJob"
        fields = [
            "id",
            "format",
            "file_name",
            "session_id",
            "dry_run",
            "state",
            "progress",
            "result",
            "errors",
            "error",
            "created_at",
            "started_at",
            "finished_at",
        ]

    def get_progress(self, job: ImportJob) -> dict:
        return {"done": job.progress_done, "total": job.progress_total}

    get_progress.__annotations__["return"] = ImportProgressSerializer


class ExportFormatSerializer(serializers.Serializer):
    format = serializers.ChoiceField(choices=FORMATS, default="jsonl")

    class Meta:
        ref_name = "ExportFormat"


class AgentSessionSerializer(serializers.Serializer):
    """An imported coding-agent session: its conversation and what the agent said of it."""

    conversation_id = serializers.IntegerField()
    session_id = serializers.CharField(source="conversation.session_id")
    title = serializers.CharField(source="conversation.title")
    format = serializers.CharField()
    agent = serializers.CharField(source="conversation.origin.agent")
    agent_version = serializers.CharField(source="conversation.origin.agent_version")
    cwd = serializers.CharField(source="conversation.origin.cwd")
    git_branch = serializers.CharField(source="conversation.origin.git_branch")
    model = serializers.CharField(source="conversation.origin.model")
    started_at = serializers.DateTimeField(source="conversation.origin.started_at", allow_null=True)
    ended_at = serializers.DateTimeField(source="conversation.origin.ended_at", allow_null=True)
    metadata = serializers.JSONField(
        help_text="The rest: why a branch, fork or sub-agent exists (line, parent_session, "
        "branch_reason; a Codex fork's parent_conversation_id, replayed_messages and "
        "fork_point), the agent's own session record (session_meta, turn_contexts, ...)."
    )

    class Meta:
        ref_name = "AgentSession"


AgentSessionPageSerializer = cursor_page("AgentSessionPageSerializer", AgentSessionSerializer)


class WatchReceiveQuerySerializer(serializers.Serializer):
    path = serializers.RegexField(PATH_PATTERN, max_length=4000)
    mode = serializers.ChoiceField(choices=["append", "replace", "delete", "import"])
    offset = serializers.IntegerField(min_value=0, default=0)


class WatchReceiveSerializer(serializers.Serializer):
    size = serializers.IntegerField(help_text="Bytes of the file the mirror now holds.")
    imported = serializers.DictField(
        child=serializers.IntegerField(), required=False, help_text="import: rows added."
    )
    errors = serializers.ListField(child=serializers.DictField(), required=False)
    problems = serializers.ListField(child=serializers.DictField(), required=False)
