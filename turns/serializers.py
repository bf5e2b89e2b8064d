"""Serializers of the turn engine API (uniquely named for the OpenAPI schema)."""

from __future__ import annotations

from rest_framework import serializers

from core.api.requests import RequestSerializer
from core.api.schema import cursor_page
from turns.models import ContextStrategy, ToolsMode
from turns.selectors import pending_count


class StateRefSerializer(serializers.Serializer):
    id = serializers.CharField()
    state_seq = serializers.IntegerField()

    class Meta:
        ref_name = "TurnStateRef"


def _state_ref(state) -> dict | None:
    return None if state is None else {"id": state.pk, "state_seq": state.state_seq}


class PinSerializer(serializers.Serializer):
    id = serializers.CharField()
    text = serializers.CharField()
    created_at = serializers.CharField()

    class Meta:
        ref_name = "PinnedFact"


class StateSerializer(serializers.Serializer):
    id = serializers.CharField()
    session_id = serializers.CharField()
    branch_id = serializers.CharField()
    state_seq = serializers.IntegerField()
    parent_id = serializers.CharField(allow_null=True)
    summary = serializers.CharField()
    pinned_facts = PinSerializer(many=True)
    token_count_est = serializers.IntegerField()
    schema_version = serializers.IntegerField()
    reason = serializers.CharField()
    source_turn_id = serializers.CharField(allow_null=True)
    librarian = serializers.DictField()
    created_at = serializers.DateTimeField()

    class Meta:
        ref_name = "BranchState"


class StepSummarySerializer(serializers.Serializer):
    id = serializers.CharField()
    step_index = serializers.IntegerField()
    provider = serializers.CharField()
    model_id = serializers.CharField()
    outcome = serializers.DictField()
    usage = serializers.DictField()
    stream_displayed_bytes = serializers.IntegerField()
    stream_durable_bytes = serializers.IntegerField()
    started_at = serializers.DateTimeField()
    ended_at = serializers.DateTimeField(allow_null=True)

    class Meta:
        ref_name = "ProviderStepSummary"


class StepSerializer(StepSummarySerializer):
    turn_id = serializers.CharField()
    request_json = serializers.JSONField(help_text="The request as sent (no key, no headers).")
    response_json = serializers.JSONField(allow_null=True)
    normalized_items = serializers.JSONField()
    stream_path = serializers.CharField(allow_null=True)

    class Meta:
        ref_name = "ProviderStep"


class TurnSerializer(serializers.Serializer):
    id = serializers.CharField()
    session_id = serializers.CharField()
    branch_id = serializers.CharField()
    turn_seq = serializers.IntegerField()
    phase = serializers.CharField()
    pending = serializers.SerializerMethodField(
        help_text="Answered but its state not yet committed (in the next context)."
    )
    incomplete = serializers.SerializerMethodField(
        help_text="The answer is partial output of a stream that did not finish."
    )
    user_message = serializers.JSONField()
    final_assistant_message = serializers.JSONField(allow_null=True)
    primary_provider = serializers.CharField()
    primary_model = serializers.CharField()
    tools_mode = serializers.CharField()
    state_before = serializers.SerializerMethodField()
    state_after = serializers.SerializerMethodField()
    index_status = serializers.CharField()
    error = serializers.JSONField(allow_null=True)
    telemetry = serializers.JSONField()
    attached_chunks = serializers.JSONField()
    steps = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    class Meta:
        ref_name = "UserTurn"

    def get_pending(self, turn) -> bool:
        return turn.is_pending

    def get_incomplete(self, turn) -> bool:
        return bool((turn.final_assistant_message or {}).get("incomplete"))

    def get_state_before(self, turn) -> StateRefSerializer:
        return _state_ref(turn.state_before)

    def get_state_after(self, turn) -> StateRefSerializer(allow_null=True):  # type: ignore[valid-type]
        return _state_ref(turn.state_after)

    def get_steps(self, turn) -> StepSummarySerializer(many=True):  # type: ignore[valid-type]
        return StepSummarySerializer(turn.steps.all(), many=True).data


class TurnContextSerializer(serializers.Serializer):
    turn_id = serializers.CharField()
    context = serializers.JSONField(
        allow_null=True, help_text="The assembled context as sent (null before context_prepared)."
    )
    requests = serializers.ListField(
        child=serializers.JSONField(), help_text="Each step's stored provider request."
    )

    class Meta:
        ref_name = "TurnContext"


class BranchSerializer(serializers.Serializer):
    id = serializers.CharField()
    session_id = serializers.CharField()
    label = serializers.CharField()
    conversation_id = serializers.IntegerField(help_text="The LCM conversation backing it.")
    parent_id = serializers.CharField(allow_null=True)
    fork_turn_seq = serializers.IntegerField(allow_null=True)
    base_state_id = serializers.CharField(allow_null=True)
    head_state_id = serializers.CharField(allow_null=True)
    head_seq = serializers.IntegerField()
    last_turn_seq = serializers.IntegerField()
    pending_count = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField()

    class Meta:
        ref_name = "Branch"

    def get_pending_count(self, branch) -> int:
        pending = self.context.get("pending")
        if pending is not None:
            return pending.get(branch.pk, 0)
        return pending_count(branch_id=branch.pk)


class SessionSerializer(serializers.Serializer):
    id = serializers.CharField()
    title = serializers.CharField()
    active_branch_id = serializers.CharField(allow_null=True)
    default_model = serializers.CharField()
    context_strategy = serializers.CharField()
    tools_mode = serializers.CharField()
    system_prompt = serializers.CharField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    class Meta:
        ref_name = "ChatSession"


class SessionDetailSerializer(SessionSerializer):
    branches = BranchSerializer(many=True)
    head_seq = serializers.IntegerField(help_text="Of the active branch.")
    head_state_id = serializers.CharField(allow_null=True, help_text="Of the active branch.")
    pending_count = serializers.IntegerField(help_text="Pending turns on the active branch.")

    class Meta:
        ref_name = "ChatSessionDetail"


class SessionCreateSerializer(RequestSerializer):
    title = serializers.CharField(required=False, allow_blank=True, default="", max_length=500)
    default_model = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=255,
        help_text="A configured model name (GET /models/); default: the configured default.",
    )
    context_strategy = serializers.ChoiceField(
        choices=ContextStrategy.values, required=False, default=ContextStrategy.STATE
    )
    tools_mode = serializers.ChoiceField(
        choices=ToolsMode.values, required=False, default=ToolsMode.DISABLED
    )
    system_prompt = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=100_000
    )

    class Meta:
        ref_name = "ChatSessionCreate"


class ForkSerializer(RequestSerializer):
    turn_id = serializers.CharField(
        required=False,
        allow_null=True,
        help_text="A committed turn of this branch; default: the head.",
    )
    label = serializers.CharField(required=False, allow_blank=True, default="", max_length=500)

    class Meta:
        ref_name = "BranchForkRequest"


class RollbackSerializer(RequestSerializer):
    state_seq = serializers.IntegerField(min_value=0)
    label = serializers.CharField(required=False, allow_blank=True, default="", max_length=500)

    class Meta:
        ref_name = "BranchRollbackRequest"


class PinCreateSerializer(RequestSerializer):
    text = serializers.CharField(max_length=2000, trim_whitespace=False)

    class Meta:
        ref_name = "PinCreateRequest"


class PinResultSerializer(serializers.Serializer):
    pin = PinSerializer(allow_null=True)
    state = StateSerializer()

    class Meta:
        ref_name = "PinResult"


class CommitResultSerializer(serializers.Serializer):
    committed = StateRefSerializer(many=True)
    head_seq = serializers.IntegerField()
    head_state_id = serializers.CharField()
    pending_count = serializers.IntegerField()

    class Meta:
        ref_name = "CommitResult"


class ActivateBranchSerializer(RequestSerializer):
    branch_id = serializers.CharField()

    class Meta:
        ref_name = "ActivateBranchRequest"


class ModelInfoSerializer(serializers.Serializer):
    name = serializers.CharField()
    provider = serializers.CharField()
    model_id = serializers.CharField()
    context_limit = serializers.IntegerField()
    max_output_tokens = serializers.IntegerField()
    api_key_env = serializers.CharField(allow_null=True)
    available = serializers.BooleanField(help_text="Its key is set (always true for offline).")
    default = serializers.BooleanField()

    class Meta:
        ref_name = "ModelInfo"


SessionPageSerializer = cursor_page("ChatSessionPage", SessionSerializer)
TurnPageSerializer = cursor_page("UserTurnPage", TurnSerializer)


def state_data(state) -> dict:
    return {
        "id": state.pk,
        "session_id": state.session_id,
        "branch_id": state.branch_id,
        "state_seq": state.state_seq,
        "parent_id": state.parent_id,
        "summary": state.summary,
        "pinned_facts": state.pinned_facts,
        "token_count_est": state.token_count_est,
        "schema_version": state.schema_version,
        "reason": state.reason,
        "source_turn_id": state.source_turn_id,
        "librarian": state.librarian,
        "created_at": state.created_at,
    }
