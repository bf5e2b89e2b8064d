"""The turn engine API (non-streaming part; POST sessions/{id}/turns/ and the SSE stream
are in turns/streaming.py). Views parse, call one service or selector, and render; every
object is reached through the owner checkpoint in turns/selectors.py (else 404)."""

from __future__ import annotations

import re

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound as DrfNotFound
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.pagination import SequencePagination
from core.api.schema import CURSOR_PARAMETERS, ERRORS, WRITE_ERRORS
from providers.config import default_model, models
from turns import branches, selectors, serializers, services
from turns.jobs import commit_pending
from turns.models import Branch

_ULID = re.compile(r"^[0-9A-HJKMNP-TV-Z]{26}$")


class TurnPagination(SequencePagination):
    ordering = "turn_seq"


class SessionPagination(SequencePagination):
    ordering = "-id"  # ULIDs sort by creation time

    def decode_cursor(self, request):
        cursor = super(SequencePagination, self).decode_cursor(request)
        if cursor is not None and cursor.position is not None and not _ULID.match(cursor.position):
            raise DrfNotFound(self.invalid_cursor_message)
        return cursor


def _session_detail(session) -> dict:
    detail = selectors.session_detail(session=session)
    branches = detail["branches"]
    active = next((b for b in branches if b.pk == session.active_branch_id), None)
    context = {"pending": detail["pending"]}
    return {
        **serializers.SessionSerializer(session).data,
        "branches": serializers.BranchSerializer(branches, many=True, context=context).data,
        "head_seq": active.head_seq if active else 0,
        "head_state_id": active.head_state_id if active else None,
        "pending_count": detail["pending"].get(session.active_branch_id, 0),
    }


class SessionListCreateApi(APIView):
    @extend_schema(
        operation_id="sessions_list",
        parameters=CURSOR_PARAMETERS,
        responses={200: serializers.SessionPageSerializer, **ERRORS},
        description="Your chat sessions, newest first.",
    )
    def get(self, request):
        paginator = SessionPagination()
        page = paginator.paginate_queryset(
            selectors.session_list_for_user(user=request.user), request, view=self
        )
        return paginator.get_paginated_response(serializers.SessionSerializer(page, many=True).data)

    @extend_schema(
        operation_id="sessions_create",
        request=serializers.SessionCreateSerializer,
        responses={201: serializers.SessionDetailSerializer, **WRITE_ERRORS},
        description="Create a chat session with its main branch (and that branch's LCM "
        "conversation) and the empty state 0.",
    )
    def post(self, request):
        body = serializers.SessionCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        session = services.session_create(owner=request.user, **body.validated_data)
        return Response(_session_detail(session), status=status.HTTP_201_CREATED)


class SessionDetailApi(APIView):
    @extend_schema(
        operation_id="sessions_retrieve",
        responses={200: serializers.SessionDetailSerializer, **ERRORS},
        description="A session with its branches, the active branch's head and its number "
        "of pending turns.",
    )
    def get(self, request, session_id: str):
        session = selectors.session_get_for_user(user=request.user, session_id=session_id)
        return Response(_session_detail(session))


class TurnListApi(APIView):
    """GET sessions/{id}/turns/; turns/streaming.py's TurnCreateApi adds POST."""

    @extend_schema(
        operation_id="turns_list",
        parameters=[
            OpenApiParameter(
                "branch_id", str, description="A branch of the session (default: the active one)."
            ),
            *CURSOR_PARAMETERS,
        ],
        responses={200: serializers.TurnPageSerializer, **ERRORS},
        description="The history a branch sees (its ancestry up to each fork point, then "
        "its own turns), in turn_seq order, with each turn's steps.",
    )
    def get(self, request, session_id: str):
        session = selectors.session_get_for_user(user=request.user, session_id=session_id)
        branch = selectors.branch_for_turn(
            session=session, branch_id=request.query_params.get("branch_id")
        )
        paginator = TurnPagination()
        page = paginator.paginate_queryset(
            selectors.branch_history(branch=branch), request, view=self
        )
        return paginator.get_paginated_response(serializers.TurnSerializer(page, many=True).data)


class TurnDetailApi(APIView):
    @extend_schema(
        operation_id="turns_retrieve",
        responses={200: serializers.TurnSerializer, **ERRORS},
        description="A turn: phase, states before and after, messages, steps, telemetry.",
    )
    def get(self, request, turn_id: str):
        turn = selectors.turn_get_for_user(user=request.user, turn_id=turn_id)
        return Response(serializers.TurnSerializer(selectors.turn_detail(turn_id=turn.pk)).data)


class TurnContextApi(APIView):
    @extend_schema(
        operation_id="turns_context",
        responses={200: serializers.TurnContextSerializer, **ERRORS},
        description="What the model saw: the assembled context (sections, budget, token "
        "estimates, shrink steps) and every step's stored request.",
    )
    def get(self, request, turn_id: str):
        turn = selectors.turn_get_for_user(user=request.user, turn_id=turn_id)
        requests = list(turn.steps.order_by("step_index").values_list("request_json", flat=True))
        return Response({"turn_id": turn.pk, "context": turn.context, "requests": requests})


class StepDetailApi(APIView):
    @extend_schema(
        operation_id="steps_retrieve",
        responses={200: serializers.StepSerializer, **ERRORS},
        description="One provider step: request and response as stored, normalized "
        "transcript items, outcome, usage, displayed vs durable bytes.",
    )
    def get(self, request, step_id: str):
        step = selectors.step_get_for_user(user=request.user, step_id=step_id)
        return Response(serializers.StepSerializer(step).data)


def _branch_data(branch: Branch) -> dict:
    return serializers.BranchSerializer(branch).data


class BranchDetailApi(APIView):
    @extend_schema(
        operation_id="branches_retrieve",
        responses={200: serializers.BranchSerializer, **ERRORS},
    )
    def get(self, request, branch_id: str):
        return Response(
            _branch_data(selectors.branch_get_for_user(user=request.user, branch_id=branch_id))
        )


class BranchForkApi(APIView):
    @extend_schema(
        operation_id="branches_fork",
        request=serializers.ForkSerializer,
        responses={201: serializers.BranchSerializer, **WRITE_ERRORS},
        description="Fork at a committed turn of this branch (default: its head). Nothing is "
        "copied: the fork sees its ancestry up to the fork point, never later parent turns. "
        "409 turn_not_committed for a turn without a committed state.",
    )
    def post(self, request, branch_id: str):
        branch = selectors.branch_get_for_user(user=request.user, branch_id=branch_id)
        body = serializers.ForkSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        child = branches.branch_fork(
            branch=branch,
            turn_id=body.validated_data.get("turn_id"),
            label=body.validated_data["label"],
        )
        return Response(_branch_data(child), status=status.HTTP_201_CREATED)


class BranchRollbackApi(APIView):
    @extend_schema(
        operation_id="branches_rollback",
        request=serializers.RollbackSerializer,
        responses={201: serializers.BranchSerializer, **WRITE_ERRORS},
        description="Roll back to an earlier state of this branch: a fork at that state, made "
        "the session's active branch. Nothing is deleted.",
    )
    def post(self, request, branch_id: str):
        branch = selectors.branch_get_for_user(user=request.user, branch_id=branch_id)
        body = serializers.RollbackSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        child = branches.branch_rollback(
            branch=branch,
            state_seq=body.validated_data["state_seq"],
            label=body.validated_data["label"],
        )
        return Response(_branch_data(child), status=status.HTTP_201_CREATED)


class BranchStateApi(APIView):
    @extend_schema(
        operation_id="branches_state",
        responses={200: serializers.StateSerializer, **ERRORS},
        description="The branch head: the committed state summary and pinned facts.",
    )
    def get(self, request, branch_id: str):
        branch = selectors.branch_get_for_user(user=request.user, branch_id=branch_id)
        return Response(serializers.state_data(selectors.branch_state(branch=branch)))


class BranchPinsApi(APIView):
    @extend_schema(
        operation_id="branches_pins_create",
        request=serializers.PinCreateSerializer,
        responses={201: serializers.PinResultSerializer, **WRITE_ERRORS},
        description="Pin a fact: a new head state whose pinned facts end with it. Pinned "
        "facts are in every context verbatim.",
    )
    def post(self, request, branch_id: str):
        branch = selectors.branch_get_for_user(user=request.user, branch_id=branch_id)
        body = serializers.PinCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        state, pin = branches.pin_add(branch=branch, text=body.validated_data["text"])
        return Response({"pin": pin, "state": serializers.state_data(state)}, status=201)


class BranchPinDeleteApi(APIView):
    @extend_schema(
        operation_id="branches_pins_delete",
        responses={200: serializers.PinResultSerializer, **ERRORS},
        description="Unpin a fact: a new head state without it (earlier states keep it).",
    )
    def delete(self, request, branch_id: str, pin_id: str):
        branch = selectors.branch_get_for_user(user=request.user, branch_id=branch_id)
        state = branches.pin_remove(branch=branch, pin_id=pin_id)
        return Response({"pin": None, "state": serializers.state_data(state)})


class BranchCommitApi(APIView):
    @extend_schema(
        operation_id="branches_commit",
        request=None,
        responses={200: serializers.CommitResultSerializer, **ERRORS},
        description="Commit pending now: run the branch's pending summarizations here, in "
        "turn order, and advance the head.",
    )
    def post(self, request, branch_id: str):
        branch = selectors.branch_get_for_user(user=request.user, branch_id=branch_id)
        states = commit_pending(branch=branch)
        branch.refresh_from_db()
        return Response(
            {
                "committed": [{"id": s.pk, "state_seq": s.state_seq} for s in states],
                "head_seq": branch.head_seq,
                "head_state_id": branch.head_state_id,
                "pending_count": selectors.pending_count(branch_id=branch.pk),
            }
        )


class SessionActivateBranchApi(APIView):
    @extend_schema(
        operation_id="sessions_activate_branch",
        request=serializers.ActivateBranchSerializer,
        responses={200: serializers.SessionDetailSerializer, **WRITE_ERRORS},
        description="Make a branch of the session the active one (new turns go there).",
    )
    def post(self, request, session_id: str):
        session = selectors.session_get_for_user(user=request.user, session_id=session_id)
        body = serializers.ActivateBranchSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        session = branches.branch_activate(
            session=session, branch_id=body.validated_data["branch_id"]
        )
        return Response(_session_detail(session))


class ModelListApi(APIView):
    @extend_schema(
        operation_id="models_list",
        responses={200: serializers.ModelInfoSerializer(many=True), **ERRORS},
        description="The configured models; `available` is true when the model's key is set "
        "(the key itself is never shown).",
    )
    def get(self, request):
        default = default_model().name
        rows = []
        for spec in models():
            info = spec.as_dict()
            rows.append(
                {
                    "name": spec.name,
                    "provider": spec.provider,
                    "model_id": spec.model_id,
                    "context_limit": spec.context_limit,
                    "max_output_tokens": spec.max_output_tokens,
                    "api_key_env": spec.api_key_env,
                    "available": bool(info.get("key_present")),
                    "default": spec.name == default,
                }
            )
        return Response(rows)
