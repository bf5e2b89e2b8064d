"""The conversations API: create and read conversations, append and list messages,
list the active context. Views parse, call one service or selector, and render."""

from __future__ import annotations

import re

from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, PolymorphicProxySerializer, extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from conversations import secret_settings, selectors, serializers, services
from conversations.archive_port import hydrate_messages
from conversations.inputs import parse_message_payload
from core.api.errors import InvalidInput
from core.api.pagination import IdPagination, OrdinalPagination, SequencePagination
from core.api.schema import CURSOR_PARAMETERS, ERRORS, WRITE_ERRORS


def _appended(result: services.AppendedMessage) -> dict:
    m = result.message
    return {"id": m.pk, "seq": m.seq, "token_count": m.token_count, "created": result.created}


class ConversationListCreateApi(APIView):
    @extend_schema(
        operation_id="conversations_list",
        parameters=[
            OpenApiParameter(
                "session_id", str, description="Only the conversation with this session id."
            ),
            *CURSOR_PARAMETERS,
        ],
        responses={200: serializers.ConversationPageSerializer, **ERRORS},
    )
    def get(self, request):
        session_id = request.query_params.get("session_id")
        if session_id is not None and "\x00" in session_id:
            # PostgreSQL text cannot hold NUL: refuse it rather than fail in the query.
            raise InvalidInput("session_id contains a NUL character", extra={"field": "session_id"})
        queryset = selectors.conversation_list_for_user(
            user=request.user, session_id=session_id
        ).select_related("owner")
        paginator = IdPagination()
        page = paginator.paginate_queryset(queryset, request, view=self)
        return paginator.get_paginated_response(
            serializers.ConversationSerializer(page, many=True).data
        )

    @extend_schema(
        operation_id="conversations_create",
        request=serializers.ConversationCreateSerializer,
        responses={
            201: serializers.ConversationSerializer,
            200: serializers.ConversationSerializer,
            **WRITE_ERRORS,
        },
        description="Creates a conversation; an existing session_id of the same owner returns it with 200.",
    )
    def post(self, request):
        body = serializers.ConversationCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        conversation, created = services.conversation_create(
            owner=request.user, **body.validated_data
        )
        return Response(
            serializers.ConversationSerializer(conversation).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )


class ConversationDetailApi(APIView):
    @extend_schema(
        operation_id="conversations_retrieve",
        responses={200: serializers.ConversationDetailSerializer, **ERRORS},
    )
    def get(self, request, conversation_id: int):
        conversation = selectors.conversation_get_for_user(
            user=request.user, conversation_id=conversation_id
        )
        stats = selectors.conversation_stats(conversation=conversation)
        data = {**serializers.ConversationSerializer(conversation).data, **stats}
        return Response(data)


_APPEND_RESPONSE = PolymorphicProxySerializer(
    component_name="MessageAppendResponse",
    serializers=[serializers.AppendedMessageSerializer, serializers.AppendedBatchSerializer],
    resource_type_field_name=None,
)


class MessageListCreateApi(APIView):
    @extend_schema(
        operation_id="messages_list",
        parameters=CURSOR_PARAMETERS,
        responses={200: serializers.MessagePageSerializer, **ERRORS},
    )
    def get(self, request, conversation_id: int):
        conversation = selectors.conversation_get_for_user(
            user=request.user, conversation_id=conversation_id
        )
        paginator = SequencePagination()
        page = paginator.paginate_queryset(
            selectors.messages_of(conversation=conversation), request, view=self
        )
        page = hydrate_messages(page)  # archived content back from its segments
        return paginator.get_paginated_response(serializers.MessageSerializer(page, many=True).data)

    @extend_schema(
        operation_id="messages_append",
        request=PolymorphicProxySerializer(
            component_name="MessageAppend",  # COMPONENT_SPLIT_REQUEST adds "Request"
            serializers=[
                serializers.MessageInputSerializer,
                serializers.MessageBatchInputSerializer,
            ],
            resource_type_field_name=None,
        ),
        responses={
            # 201 when anything was stored; 200 when every external_id was already stored
            # (one message or a batch: the answer has the request's shape either way).
            201: _APPEND_RESPONSE,
            200: _APPEND_RESPONSE,
            **WRITE_ERRORS,
        },
        description=(
            'Appends one message, or a batch `{"messages": [...]}` of up to 1,000, all or nothing. '
            "A message whose external_id is already stored returns the original (200 for a single message)."
        ),
    )
    def post(self, request, conversation_id: int):
        conversation = selectors.conversation_get_for_user(
            user=request.user, conversation_id=conversation_id
        )
        if not isinstance(request.data, dict):
            raise InvalidInput("the body must be a JSON object")
        inputs, is_batch = parse_message_payload(
            request.data, max_batch=settings.LCM_MAX_BATCH_MESSAGES
        )
        results = services.messages_append(conversation_id=conversation.pk, messages=inputs)
        any_created = any(r.created for r in results)
        code = status.HTTP_201_CREATED if any_created else status.HTTP_200_OK
        if is_batch:
            return Response({"messages": [_appended(r) for r in results]}, status=code)
        return Response(_appended(results[0]), status=code)


class ContextItemListApi(APIView):
    @extend_schema(
        operation_id="context_items_list",
        parameters=CURSOR_PARAMETERS,
        responses={200: serializers.ContextItemPageSerializer, **ERRORS},
    )
    def get(self, request, conversation_id: int):
        conversation = selectors.conversation_get_for_user(
            user=request.user, conversation_id=conversation_id
        )
        paginator = OrdinalPagination()
        page = paginator.paginate_queryset(
            selectors.context_items_of(conversation=conversation), request, view=self
        )
        return paginator.get_paginated_response(
            serializers.ContextItemSerializer(page, many=True).data
        )


# --- secrets at ingest (docs/security.md, "Secrets at ingest") ---------------------------


def _policy_body(request) -> str | None:
    body = serializers.SecretPolicyInputSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    return body.validated_data["policy"]


class OwnerSecretPolicyApi(APIView):
    @extend_schema(
        operation_id="secret_policy_get",
        responses={200: serializers.OwnerSecretPolicySerializer, **ERRORS},
        description="Your secret policy at ingest (null: none), the server's, and the one in force.",
    )
    def get(self, request):
        return Response(secret_settings.owner_policy(user=request.user))

    @extend_schema(
        operation_id="secret_policy_set",
        request=serializers.SecretPolicyInputSerializer,
        responses={200: serializers.OwnerSecretPolicySerializer, **WRITE_ERRORS},
        description="Set your secret policy for all your conversations (null: the server's "
        "applies). Audited. Applies to content sent from now on.",
    )
    def put(self, request):
        policy = _policy_body(request)
        return Response(
            secret_settings.owner_policy_set(user=request.user, policy=policy, request=request)
        )


class ConversationSecretPolicyApi(APIView):
    @extend_schema(
        operation_id="conversation_secret_policy_get",
        responses={200: serializers.ConversationSecretPolicySerializer, **ERRORS},
        description="The conversation's own secret policy (null: inherit), its owner's, the "
        "server's, and the one in force.",
    )
    def get(self, request, conversation_id: int):
        conversation = selectors.conversation_get_for_user(
            user=request.user, conversation_id=conversation_id
        )
        return Response(secret_settings.conversation_policy(conversation=conversation))

    @extend_schema(
        operation_id="conversation_secret_policy_set",
        request=serializers.SecretPolicyInputSerializer,
        responses={200: serializers.ConversationSecretPolicySerializer, **WRITE_ERRORS},
        description="Set the conversation's own secret policy (null: inherit). Audited.",
    )
    def put(self, request, conversation_id: int):
        conversation = selectors.conversation_get_for_user(
            user=request.user, conversation_id=conversation_id
        )
        policy = _policy_body(request)
        return Response(
            secret_settings.conversation_policy_set(
                conversation=conversation, policy=policy, actor=request.user, request=request
            )
        )


def _bool_param(request, name: str) -> bool | None:
    raw = request.query_params.get(name)
    if raw is None:
        return None
    if raw not in ("true", "false"):
        raise InvalidInput(f"{name} must be true or false", extra={"field": name})
    return raw == "true"


_ID_MAX = 10**18 - 1
_POSITIVE = re.compile(r"[1-9][0-9]{0,17}")


def _int_param(request, name: str) -> int | None:
    raw = request.query_params.get(name)
    if raw is None:
        return None
    if not _POSITIVE.fullmatch(raw):
        raise InvalidInput(f"{name} must be an integer from 1 to {_ID_MAX}", extra={"field": name})
    return int(raw)


class SecretFindingListApi(APIView):
    @extend_schema(
        operation_id="secret_findings_list",
        parameters=[
            OpenApiParameter(
                "conversation",
                {"type": "integer", "minimum": 1, "maximum": _ID_MAX},
                description="Only this conversation's.",
            ),
            OpenApiParameter("action", str, enum=["masked", "flagged"]),
            OpenApiParameter("reviewed", bool, description="Only reviewed (true) or not (false)."),
            *CURSOR_PARAMETERS,
        ],
        responses={200: serializers.SecretFindingPageSerializer, **ERRORS},
        description="Secrets found at ingest in your conversations, newest first: where and "
        "of what kind, never the secret. `action=flagged&reviewed=false` is the review queue.",
    )
    def get(self, request):
        action = request.query_params.get("action")
        if action is not None and action not in ("masked", "flagged"):
            raise InvalidInput("action must be masked or flagged", extra={"field": "action"})
        queryset = secret_settings.findings_for_user(
            user=request.user,
            conversation_id=_int_param(request, "conversation"),
            action=action,
            reviewed=_bool_param(request, "reviewed"),
        )
        paginator = IdPagination()
        page = paginator.paginate_queryset(queryset, request, view=self)
        return paginator.get_paginated_response(
            serializers.SecretFindingSerializer(page, many=True).data
        )


class SecretFindingReviewApi(APIView):
    @extend_schema(
        operation_id="secret_finding_review",
        request=None,
        responses={200: serializers.SecretFindingSerializer, **WRITE_ERRORS},
        description="Mark a finding as reviewed (it leaves the review queue).",
    )
    def post(self, request, finding_id: int):
        finding = secret_settings.finding_review(user=request.user, finding_id=finding_id)
        return Response(serializers.SecretFindingSerializer(finding).data)
