"""The compaction API: compact a conversation, read a job, assemble a context.
Views parse, go through the access checkpoint, call one service, and render."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from compaction import serializers
from compaction.assembly import assemble_context
from compaction.engine import compact_conversation
from compaction.models import Reason
from compaction.selectors import job_get_for_user
from compaction.services import job_request
from conversations.selectors import conversation_get_for_user
from core.api.errors import LcmError


class SummarizerAuthFailed(LcmError):
    """The model provider refused the configured credentials: nothing was written."""

    status = 502
    code = "summarizer_auth_failed"


class CompactApi(APIView):
    @extend_schema(
        operation_id="conversations_compact",
        request=serializers.CompactRequestSerializer,
        responses={
            202: serializers.CompactionJobSerializer,
            200: serializers.CompactionResultSerializer,
            409: OpenApiResponse(description="Another compaction holds the conversation."),
            502: OpenApiResponse(description="The summarizer's credentials were refused."),
        },
        description=(
            "Compacts the conversation. Without `wait` a job is queued (202; an already pending "
            "job is returned instead of a second one). With `wait` the compaction runs now and "
            "the result is returned (200), or 409 with Retry-After if another one is running."
        ),
    )
    def post(self, request, conversation_id: int):
        conversation = conversation_get_for_user(user=request.user, conversation_id=conversation_id)
        body = serializers.CompactRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        options = body.validated_data
        if options["wait"]:
            result = compact_conversation(
                conversation_id=conversation.pk,
                mode=options["mode"],
                reason=Reason.MANUAL,
                target_tokens=options.get("target_tokens"),
            )
            if result.error_code == "summarizer_auth":
                raise SummarizerAuthFailed(result.detail, extra={"run_id": result.run_id})
            return Response(result.as_dict(), status=status.HTTP_200_OK)
        job, _ = job_request(
            conversation=conversation,
            reason=Reason.MANUAL,
            mode=options["mode"],
            target_tokens=options.get("target_tokens"),
        )
        job.refresh_from_db()
        return Response(
            serializers.CompactionJobSerializer(job).data, status=status.HTTP_202_ACCEPTED
        )


class JobDetailApi(APIView):
    @extend_schema(operation_id="jobs_retrieve", responses=serializers.CompactionJobSerializer)
    def get(self, request, job_id: int):
        job = job_get_for_user(user=request.user, job_id=job_id)
        return Response(serializers.CompactionJobSerializer(job).data)


class AssembleApi(APIView):
    @extend_schema(
        operation_id="conversations_assemble",
        request=serializers.AssembleRequestSerializer,
        responses=serializers.AssembledContextSerializer,
        description=(
            "The model input for the next call: system first, the fresh tail always, then older "
            "items newest first while they fit `token_budget` (default: the conversation's), in "
            "chronological order. Summaries are XML marked as untrusted data."
        ),
    )
    def post(self, request, conversation_id: int):
        conversation = conversation_get_for_user(user=request.user, conversation_id=conversation_id)
        body = serializers.AssembleRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        options = body.validated_data
        assembled = assemble_context(
            conversation=conversation,
            token_budget=options.get("token_budget"),
            system=options.get("system"),
            fmt=options["format"],
            split_summaries=options["split_summaries"],
        )
        return Response(assembled.as_dict())
