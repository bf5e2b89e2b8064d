from __future__ import annotations

from rest_framework import serializers

from core.api.requests import RequestSerializer
from security.models import ExportState, RedactionState


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


class RedactionSpanSerializer(RequestSerializer):
    message_id = serializers.IntegerField(min_value=1)
    start = serializers.IntegerField(min_value=0, help_text="First character (0-based).")
    end = serializers.IntegerField(min_value=1, help_text="One past the last character.")

    class Meta:
        ref_name = "RedactionSpan"


class RedactionRequestSerializer(RequestSerializer):
    """Exactly one of message_ids, span, literal, regex (docs/security.md, "Redaction")."""

    reason = serializers.RegexField(
        r"^[a-z0-9][a-z0-9_.-]{0,39}$",
        required=False,
        help_text="Written into the marker `[redacted: <reason> <id>]` (default `secret`).",
    )
    dry_run = serializers.BooleanField(
        required=False,
        help_text="Only plan: the job's `plan` lists every place it would touch, with counts.",
    )
    confirm_dry_run = serializers.CharField(
        required=False,
        min_length=1,
        max_length=24,
        help_text="The id of a finished dry run of the same selector and scope: required for "
        "a literal of fewer than 8 characters and for a regex (409 `dry_run_required`).",
    )
    message_ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1),
        required=False,
        min_length=1,
        max_length=1000,
        help_text="Whole messages: their content, parts and files become the marker.",
    )
    span = RedactionSpanSerializer(required=False, help_text="One message's characters.")
    literal = serializers.CharField(
        required=False, min_length=4, max_length=10000, trim_whitespace=False
    )
    regex = serializers.CharField(
        required=False, min_length=1, max_length=10000, trim_whitespace=False,
        help_text="A Python regular expression; it may not match the empty string.",
    )  # fmt: skip

    schema_rules = {
        "oneOf": [
            {"required": ["message_ids"]},
            {"required": ["span"]},
            {"required": ["literal"]},
            {"required": ["regex"]},
        ]
    }

    class Meta:
        ref_name = "RedactionRequest"


class UserRedactionRequestSerializer(RedactionRequestSerializer):
    user_id = serializers.IntegerField(
        required=False, min_value=1, help_text="Staff only: another user's data."
    )

    class Meta:
        ref_name = "UserRedactionRequest"


class RedactionProgressSerializer(serializers.Serializer):
    steps_done = serializers.IntegerField()
    steps_total = serializers.IntegerField(help_text="0 for a dry run (it plans only).")
    step = serializers.CharField(allow_null=True, help_text="The step running now, if any.")

    class Meta:
        ref_name = "RedactionProgress"


class RedactionSerializer(serializers.Serializer):
    id = serializers.CharField()
    url = serializers.CharField(help_text="Where to read the job again.")
    state = serializers.ChoiceField(
        choices=RedactionState.choices,
        help_text="pending (queued), running, done (verified: nothing found), or failed "
        "(`error` says why; the same request again resumes it)",
    )
    dry_run = serializers.BooleanField()
    progress = RedactionProgressSerializer()
    reason = serializers.CharField()
    marker = serializers.CharField()
    scope = serializers.DictField()
    selector = serializers.CharField()
    created_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    by = serializers.CharField()
    plan = serializers.DictField(
        help_text="The places it touches, with counts (empty until planned): canonical "
        "(messages, parts, archived_messages), archive_segments, summaries by depth, "
        "memory_units, full_text_rows, large_files, rows per model, journals, "
        "exports_on_record; distinct_matches for a regex. A dry run's result."
    )
    steps = serializers.DictField(help_text="Each step: when it finished, its counts.")
    verification = serializers.DictField(
        help_text="`occurrences` (0 is the proof), `places_scanned`, `found`."
    )
    exports_on_record = serializers.ListField(
        child=serializers.DictField(), help_text="Exports taken before it (out of reach)."
    )
    error = serializers.CharField()

    class Meta:
        ref_name = "Redaction"


class ExportProgressSerializer(serializers.Serializer):
    done = serializers.IntegerField(help_text="Rows, files and journals written.")
    total = serializers.IntegerField(allow_null=True, help_text="Known once planned.")

    class Meta:
        ref_name = "ExportProgress"


class ExportTargetSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["conversation", "session"])
    id = serializers.CharField()

    class Meta:
        ref_name = "ExportTarget"


class ExportJobSerializer(serializers.Serializer):
    id = serializers.CharField()
    url = serializers.CharField(help_text="Where to read the job again.")
    state = serializers.ChoiceField(choices=ExportState.choices)
    target = ExportTargetSerializer()
    progress = ExportProgressSerializer()
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    expires_at = serializers.DateTimeField(
        allow_null=True, help_text="When the stored archive is deleted."
    )
    size = serializers.IntegerField(allow_null=True, help_text="Bytes of the archive.")
    sha256 = serializers.CharField(allow_null=True)
    manifest = serializers.DictField(help_text="Rows per table, files and journals written.")
    download = serializers.CharField(
        allow_null=True, help_text="The archive's URL once done (application/zip)."
    )
    error = serializers.CharField()

    class Meta:
        ref_name = "ExportJob"
