"""The conversations API: create and read conversations, append and list messages,
list the active context. Views parse, call one service or selector, and render."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, PolymorphicProxySerializer, extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from conversations import selectors, serializers, services
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
