"""Sessions, branches, turns and steps in the admin, read-only (canonical rows)."""

from __future__ import annotations

from django.contrib import admin

from core.admin_base import ReadOnlyAdmin
from turns.models import Branch, ProviderStep, Session, StateCheckpoint, TurnJob, UserTurn


@admin.register(Session)
class SessionAdmin(ReadOnlyAdmin):
    list_display = ("id", "title", "owner", "default_model", "context_strategy", "created_at")
    list_select_related = ("owner",)
    raw_id_fields = ("owner", "active_branch")
    search_fields = ("=id", "title")


@admin.register(Branch)
class BranchAdmin(ReadOnlyAdmin):
    list_display = ("id", "label", "session", "head_seq", "last_turn_seq", "parent", "created_at")
    list_select_related = ("session", "parent")
    raw_id_fields = ("session", "conversation", "parent", "base_state", "head_state")
    search_fields = ("=id", "=session__id")


@admin.register(StateCheckpoint)
class StateCheckpointAdmin(ReadOnlyAdmin):
    list_display = ("id", "branch", "state_seq", "reason", "token_count_est", "created_at")
    list_select_related = ("branch",)
    raw_id_fields = ("session", "branch", "parent", "source_turn")
    search_fields = ("=id", "=branch__id")


@admin.register(UserTurn)
class UserTurnAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "branch",
        "turn_seq",
        "phase",
        "primary_model",
        "index_status",
        "created_at",
    )
    list_filter = ("phase", "index_status")
    list_select_related = ("branch",)
    raw_id_fields = ("session", "branch", "state_before", "state_after")
    search_fields = ("=id", "=branch__id")


@admin.register(ProviderStep)
class ProviderStepAdmin(ReadOnlyAdmin):
    list_display = ("id", "turn", "step_index", "provider", "model_id", "started_at", "ended_at")
    list_select_related = ("turn",)
    raw_id_fields = ("turn",)
    search_fields = ("=id", "=turn__id")


@admin.register(TurnJob)
class TurnJobAdmin(ReadOnlyAdmin):
    list_display = ("id", "job_type", "turn", "state", "attempts", "lease_until", "updated_at")
    list_filter = ("job_type", "state")
    raw_id_fields = ("turn", "branch")
