"""The retention API: a user's own policy, and a conversation's policy, effective policy,
archived ranges and sizes (docs/retention.md)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from conversations.selectors import conversation_get_for_user
from core.api.schema import ERRORS, WRITE_ERRORS
from retention import selectors, serializers, services


def _values(request) -> dict:
    body = serializers.PolicyInputSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    return dict(body.validated_data)


class UserPolicyApi(APIView):
    @extend_schema(
        operation_id="retention_policy_get",
        responses={200: serializers.UserPolicyResponseSerializer, **ERRORS},
        description="Your retention policy (null: none) and the server default.",
    )
    def get(self, request):
        return Response(selectors.user_policy(user=request.user))

    @extend_schema(
        operation_id="retention_policy_set",
        request=serializers.PolicyInputSerializer,
        responses={200: serializers.UserPolicyResponseSerializer, **WRITE_ERRORS},
        description="Set fields of your retention policy (for all your conversations); a "
        "field left out keeps its value, null inherits the server default.",
    )
    def put(self, request):
        services.policy_set(user=request.user, values=_values(request), actor=request.user,
                            request=request)  # fmt: skip
        return Response(selectors.user_policy(user=request.user))

    @extend_schema(
        operation_id="retention_policy_delete",
        request=None,
        responses={204: None, **ERRORS},
        description="Remove your retention policy (the server default applies).",
    )
    def delete(self, request):
        services.policy_clear(user=request.user, actor=request.user, request=request)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ConversationRetentionApi(APIView):
    @extend_schema(
        operation_id="conversation_retention_get",
        responses={200: serializers.ConversationRetentionSerializer, **ERRORS},
        description="The conversation's own policy, its effective policy (server, owner, "
        "conversation), and its archived ranges with their sizes.",
    )
    def get(self, request, conversation_id: int):
        conversation = conversation_get_for_user(user=request.user, conversation_id=conversation_id)
        return Response(selectors.conversation_retention(conversation=conversation))

    @extend_schema(
        operation_id="conversation_retention_set",
        request=serializers.PolicyInputSerializer,
        responses={200: serializers.ConversationRetentionSerializer, **WRITE_ERRORS},
        description="Set fields of the conversation's retention policy (null: inherit).",
    )
    def put(self, request, conversation_id: int):
        conversation = conversation_get_for_user(user=request.user, conversation_id=conversation_id)
        values = _values(request)
        services.policy_set(conversation=conversation, values=values, actor=request.user,
                            request=request)  # fmt: skip
        return Response(selectors.conversation_retention(conversation=conversation))

    @extend_schema(
        operation_id="conversation_retention_delete",
        request=None,
        responses={204: None, **ERRORS},
        description="Remove the conversation's own policy (the owner's or server's applies).",
    )
    def delete(self, request, conversation_id: int):
        conversation = conversation_get_for_user(user=request.user, conversation_id=conversation_id)
        services.policy_clear(conversation=conversation, actor=request.user, request=request)
        return Response(status=status.HTTP_204_NO_CONTENT)
