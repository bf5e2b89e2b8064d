"""The retrieval API: describe, grep, expand, sub-agent expansions and model tools.
Views parse, call one selector or service (all through the access checkpoint), render."""

from __future__ import annotations

import json
import time

from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from conversations.selectors import conversation_get_for_user
from core.tool_result import to_json
from retrieval import selectors, serializers, services
from retrieval.expansion import ExpansionRequest, expansion_run
from retrieval.grep import GrepRequest, grep_for_user
from retrieval.metrics import observe_expand_since
from retrieval.tool_definitions import TOOL_DEFINITIONS
from retrieval.tools import tool_call_for_user


def _json_response(data) -> Response:
    """Render through the same encoder the tools use (datetimes as ISO 8601)."""
    return Response(json.loads(to_json(data)))


def _valid(serializer_class, request) -> dict:
    body = serializer_class(data=request.data)
    body.is_valid(raise_exception=True)
    return dict(body.validated_data)


class DescribeApi(APIView):
    @extend_schema(
        operation_id="describe",
        responses=PolymorphicProxySerializer(
            component_name="DescribeResponse",
            serializers={
                "summary": serializers.DescribeSummarySerializer,
                "file": serializers.DescribeFileSerializer,
                "tool_output": serializers.DescribeToolOutputSerializer,
            },
            resource_type_field_name="type",
        ),
        description=(
            "Describe a summary (sum_...), a large file (file_...) or a tool output (out_..., "
            "whole). Unknown ids and ids in "
            "another user's conversation are 404."
        ),
    )
    def get(self, request, item_id: str):
        return _json_response(selectors.describe_for_user(user=request.user, item_id=item_id))


class GrepApi(APIView):
    @extend_schema(
        operation_id="grep",
        request=serializers.GrepQuerySerializer,
        responses=serializers.GrepResponseSerializer,
        description=(
            "Search messages and/or summaries of the caller's conversations (or one) by full "
            "text or regex. An invalid regex is a 400 (invalid_regex); a pattern that runs "
            "past LCM_GREP_TIMEOUT_MS is a 422 (search_timeout)."
        ),
    )
    def post(self, request):
        data = _valid(serializers.GrepQuerySerializer, request)
        results = grep_for_user(user=request.user, request=GrepRequest(**data))
        return _json_response({"results": results})


class ExpandApi(APIView):
    @extend_schema(
        operation_id="expand",
        request=serializers.ExpandInputSerializer,
        responses=serializers.ExpandResponseSerializer,
        description=(
            "The summaries below a summary down `depth` levels and, with include_messages, the "
            "source messages of every leaf reached, in order, cut at token_cap. With grant_id, "
            "inside that delegation grant (clamped to it; 403 when expired, revoked or used up)."
        ),
    )
    def post(self, request):
        data = _valid(serializers.ExpandInputSerializer, request)
        started = time.perf_counter()
        grant_id = data.pop("grant_id")
        if grant_id:
            grant = services.grant_get_for_user(user=request.user, grant_id=grant_id)
            result = services.grant_expand(grant=grant, **data)
        else:
            result = selectors.expand_for_user(user=request.user, **data)
        observe_expand_since(started, kind="expand")
        return _json_response(result.as_dict())


class ExpansionApi(APIView):
    @extend_schema(
        operation_id="expansions_create",
        request=serializers.ExpansionInputSerializer,
        responses=serializers.ExpansionResponseSerializer,
        description=(
            "Answer a focused question about compacted history under a delegation grant. With "
            "ANTHROPIC_API_KEY set a sub-agent reads through lcm_describe/lcm_expand; without, "
            "the bounded excerpt it would have read is returned (mode: offline)."
        ),
    )
    def post(self, request):
        data = _valid(serializers.ExpansionInputSerializer, request)
        result = expansion_run(user=request.user, request=ExpansionRequest(**data))
        return _json_response(result)


class ToolListApi(APIView):
    @extend_schema(operation_id="tools_list", responses=serializers.ToolListResponseSerializer)
    def get(self, request):
        return Response({"tools": TOOL_DEFINITIONS})


class ToolCallApi(APIView):
    @extend_schema(
        operation_id="tools_call",
        request=serializers.ToolCallInputSerializer,
        responses=serializers.ToolCallResponseSerializer,
        description=(
            "Run one tool call as the caller inside `conversation_id`. Problems with the tool "
            "input come back as is_error: true (forward it as a tool_result)."
        ),
    )
    def post(self, request):
        data = _valid(serializers.ToolCallInputSerializer, request)
        conversation = conversation_get_for_user(
            user=request.user, conversation_id=data["conversation_id"]
        )
        result = tool_call_for_user(
            user=request.user,
            name=data["name"],
            input=data["input"],
            conversation_id=conversation.pk,
        )
        return Response(result.as_dict())
