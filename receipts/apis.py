"""The receipts API (docs/receipts.md): a conversation's calls, one receipt, its replay and
its diff. Views parse, go through the access checkpoint, call one selector, and render."""

from __future__ import annotations

import json
import re

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import NotFound as CursorNotFound
from rest_framework.response import Response
from rest_framework.views import APIView

from conversations.selectors import conversation_get_for_user
from core.api.errors import InvalidInput
from core.api.pagination import SequencePagination
from core.api.schema import CURSOR_PARAMETERS, ERRORS, cursor_page
from receipts import selectors, serializers
from receipts.diff import receipt_diff

_RECEIPT_ID = re.compile(r"^[0-9A-HJKMNP-TV-Z]{26}\Z")


class ReceiptPagination(SequencePagination):
    ordering = "id"  # ULIDs: oldest call first

    def decode_cursor(self, request):
        cursor = super(SequencePagination, self).decode_cursor(request)
        position = None if cursor is None else cursor.position
        if position is not None and not _RECEIPT_ID.match(position):
            raise CursorNotFound(self.invalid_cursor_message)
        return cursor


class ConversationReceiptsApi(APIView):
    @extend_schema(
        operation_id="conversations_receipts",
        parameters=CURSOR_PARAMETERS,
        responses={200: cursor_page("ReceiptPage", serializers.ReceiptSummarySerializer), **ERRORS},
        description="The conversation's model calls, oldest first: tokens in and out, cache "
        "reads and writes, cost, latency (the explorer's timeline).",
    )
    def get(self, request, conversation_id: int):
        conversation = conversation_get_for_user(user=request.user, conversation_id=conversation_id)
        paginator = ReceiptPagination()
        page = paginator.paginate_queryset(
            selectors.receipts_of_conversation(conversation_id=conversation.pk), request
        )
        data = serializers.ReceiptSummarySerializer(page, many=True).data
        return paginator.get_paginated_response(data)


class ReceiptDetailApi(APIView):
    @extend_schema(
        operation_id="receipts_retrieve",
        responses={200: serializers.ReceiptSerializer, **ERRORS},
        description="One model call: every item sent (kind, id, version, tokens, content hash, "
        "why it is there), parameters, cache marks, budget, what was left out, what came back.",
    )
    def get(self, request, receipt_id: str):
        receipt = selectors.receipt_get_for_user(user=request.user, receipt_id=receipt_id)
        return Response(serializers.ReceiptSerializer(selectors.receipt_detail(receipt)).data)


class ReceiptRequestApi(APIView):
    @extend_schema(
        operation_id="receipts_request",
        parameters=[
            OpenApiParameter(
                "as",
                str,
                enum=["json", "raw"],
                description="`raw`: the exact bytes sent upstream (headers say whether the "
                "replay is exact); default: JSON with the body and the verdict.",
            )
        ],
        responses={200: serializers.ReplaySerializer, **ERRORS},
        description="The request body sent upstream, rebuilt byte for byte from the stored "
        "items. After a redaction the replay carries the marker and says so (`exact` false).",
    )
    def get(self, request, receipt_id: str):
        receipt = selectors.receipt_get_for_user(user=request.user, receipt_id=receipt_id)
        form = request.query_params.get("as", "json")
        if form not in ("json", "raw"):
            raise InvalidInput("as must be json or raw", extra={"field": "as"})
        replay = selectors.replay(receipt)
        if form == "raw":
            answer = HttpResponse(replay.body, content_type="application/json")
            answer["X-LCM-Replay-Exact"] = "true" if replay.exact else "false"
            answer["X-LCM-Replay-Note"] = replay.note
            return answer
        return Response(
            {
                "receipt_id": receipt.id,
                "exact": replay.exact,
                "note": replay.note,
                "changed": replay.changed,
                "missing": replay.missing,
                "body_bytes": len(replay.body),
                "body": json.loads(replay.body),
            }
        )


class ReceiptDiffApi(APIView):
    @extend_schema(
        operation_id="receipts_diff",
        parameters=[
            OpenApiParameter(
                "against",
                str,
                description="Another receipt of the same conversation; default: the previous call.",
            )
        ],
        responses={200: serializers.DiffSerializer, **ERRORS},
        description="What changed since another call: items added, dropped, summarized (with "
        "the summary that replaced them), moved; the first item where the cached prefix "
        "changed and the tokens after it.",
    )
    def get(self, request, receipt_id: str):
        receipt = selectors.receipt_get_for_user(user=request.user, receipt_id=receipt_id)
        other_id = request.query_params.get("against")
        if other_id:
            against = selectors.receipt_get_for_user(user=request.user, receipt_id=other_id)
        else:
            against = selectors.receipt_previous(receipt)
            if against is None:
                raise InvalidInput(
                    "this is the conversation's first call: name one with ?against=",
                    extra={"field": "against"},
                )
        return Response(serializers.DiffSerializer(receipt_diff(receipt, against)).data)
