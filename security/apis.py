"""HTTP adapters of the security app: hard delete (the DELETE method of the conversation
and session detail endpoints, joined to those apps' GET in `lcmsite/urls.py`) and
exports."""

from __future__ import annotations

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.errors import InvalidInput
from core.api.schema import ERRORS, ErrorSerializer
from security import exports, hard_delete
from security.serializers import (
    ExportRequestSerializer,
    HardDeleteResultSerializer,
    RedactionPlanSerializer,
    RedactionRequestSerializer,
    RedactionSerializer,
    UserRedactionRequestSerializer,
)

HARD_DELETE_SCHEMA = {
    "parameters": [
        OpenApiParameter(
            "hard",
            {"type": "boolean", "enum": [True]},
            required=True,
            description="Must be `true`: the only delete there is.",
        ),
        OpenApiParameter(
            "confirm",
            {"type": "string", "minLength": 1},
            required=True,
            description="The id being deleted, repeated; another id is a 409 "
            "(`confirmation_mismatch`).",
        ),
    ],
    "request": None,
    "responses": {
        200: HardDeleteResultSerializer,
        **ERRORS,
        409: OpenApiResponse(
            ErrorSerializer,
            description="Not deletable as asked: a branch of a session, or rows shared with "
            "other conversations or sessions.",
        ),
    },
    "description": "Hard delete (irreversible): removes the content, parts, summaries, "
    "lineage, context, files, memory chunks and vectors, turns, steps, states, journals and "
    "search rows; audited without content. Owner or staff; `?hard=true` and `confirm=<id>` "
    "are required (`confirm` may also come in a JSON body, for older clients).",
}


def _confirmation(request) -> str | None:
    if request.query_params.get("hard", "").lower() != "true":
        raise InvalidInput(
            "only hard delete exists: pass ?hard=true and confirm=<id>", code="hard_required"
        )
    data = request.data if isinstance(request.data, dict) else {}
    return data.get("confirm") or request.query_params.get("confirm")


# The DELETE method of the conversation and session detail endpoints: lcmsite/urls.py
# routes each URL to a view that joins the owning app's GET to these (deleting reaches
# every app's rows, so it belongs here, not to the app that owns the endpoint).
class ConversationHardDeleteApi(APIView):
    @extend_schema(operation_id="conversations_hard_delete", **HARD_DELETE_SCHEMA)
    def delete(self, request, conversation_id: int) -> Response:
        from conversations.selectors import conversation_get_for_user

        confirm = _confirmation(request)
        conversation = conversation_get_for_user(user=request.user, conversation_id=conversation_id)
        result = hard_delete.hard_delete_conversation(
            conversation=conversation, confirm=confirm, via="api", request=request
        )
        return Response(result.as_dict())


class SessionHardDeleteApi(APIView):
    @extend_schema(operation_id="sessions_hard_delete", **HARD_DELETE_SCHEMA)
    def delete(self, request, session_id: str) -> Response:
        from turns.selectors import session_get_for_user

        confirm = _confirmation(request)
        session = session_get_for_user(user=request.user, session_id=session_id)
        result = hard_delete.hard_delete_session(
            session=session, confirm=confirm, via="api", request=request
        )
        return Response(result.as_dict())


class ExportApi(APIView):
    @extend_schema(
        operation_id="exports_create",
        request=ExportRequestSerializer,
        responses={
            (200, "application/zip"): OpenApiResponse(
                OpenApiTypes.BINARY,
                description="The archive (zip: manifest.json, tables/, transcripts/, files/, "
                "streams/; see docs/security.md).",
            ),
            **ERRORS,
            409: OpenApiResponse(
                ErrorSerializer, description="A branch conversation: export its session."
            ),
        },
        description="Export a conversation or a turn session as a full-fidelity archive "
        "(user-initiated, audited). Owner or staff.",
    )
    def post(self, request):
        from conversations.selectors import conversation_get_for_user
        from turns.selectors import session_get_for_user

        serializer = ExportRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        if "conversation_id" in data:
            conversation = conversation_get_for_user(
                user=request.user, conversation_id=data["conversation_id"]
            )
            export = exports.export_conversation(
                conversation=conversation, actor=request.user, via="api", request=request
            )
        else:
            session = session_get_for_user(user=request.user, session_id=data["session_id"])
            export = exports.export_session(
                session=session, actor=request.user, via="api", request=request
            )
        # Streamed as it is built: the client gets bytes from the first table on, and no
        # request waits for the whole archive (docs/security.md, "Exports").
        if isinstance(request._request, ASGIRequest):
            body = _async_chunks(export.chunks())
        else:
            body = export.chunks()
        response = StreamingHttpResponse(body, content_type="application/zip")
        response["Content-Disposition"] = f'attachment; filename="{export.filename}"'
        return response


async def _async_chunks(chunks):
    """Each chunk built in a worker thread (the ORM is synchronous) and sent as it comes;
    under ASGI, Django would otherwise read a synchronous iterator to its end first."""
    step = sync_to_async(next, thread_sensitive=True)
    while True:
        chunk = await step(chunks, None)
        if chunk is None:
            return
        yield chunk


REDACTION_RESPONSES = {
    200: RedactionPlanSerializer,
    201: RedactionSerializer,
    **ERRORS,
}
REDACTION_DESCRIPTION = (
    "Redact (docs/security.md, 'Redaction'): by message ids, one message's span, or a "
    "literal or regex, across the scope. The removed text becomes `[redacted: <reason> "
    "<id>]` in the messages and in everything derived (summaries regenerated up the DAG, "
    "memory units and vectors, full-text rows, large files, archive segments, journals, "
    "turn rows), then every place is scanned (`verification.occurrences` 0 is the proof). "
    "`dry_run: true` answers 200 with every place it would touch; the job answers 201. "
    "Owner or staff."
)


def _validated(request, serializer_class=RedactionRequestSerializer) -> dict:
    serializer = serializer_class(data=request.data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


def _redact(request, scope, data: dict) -> Response:
    from security.redaction import jobs
    from security.redaction.request import parse

    redaction = parse(data, scope)
    if redaction.dry_run:
        return Response(jobs.dry_run(redaction))
    row = jobs.start(redaction, actor=request.user, via="api", http_request=request)
    return Response(jobs.report(row), status=201)


class ConversationRedactionApi(APIView):
    @extend_schema(
        operation_id="conversations_redact",
        request=RedactionRequestSerializer,
        responses=REDACTION_RESPONSES,
        description=REDACTION_DESCRIPTION,
    )
    def post(self, request, conversation_id: int) -> Response:
        from conversations.selectors import conversation_get_for_user
        from security.redaction.request import scope_of_conversation

        conversation = conversation_get_for_user(user=request.user, conversation_id=conversation_id)
        return _redact(request, scope_of_conversation(conversation), _validated(request))


class SessionRedactionApi(APIView):
    @extend_schema(
        operation_id="sessions_redact",
        request=RedactionRequestSerializer,
        responses=REDACTION_RESPONSES,
        description=REDACTION_DESCRIPTION + " Scope: the session and all its branches.",
    )
    def post(self, request, session_id: str) -> Response:
        from security.redaction.request import scope_of_session
        from turns.selectors import session_get_for_user

        session = session_get_for_user(user=request.user, session_id=session_id)
        return _redact(request, scope_of_session(session), _validated(request))


class UserRedactionApi(APIView):
    @extend_schema(
        operation_id="redactions_create",
        request=UserRedactionRequestSerializer,
        responses=REDACTION_RESPONSES,
        description=REDACTION_DESCRIPTION + " Scope: all of the caller's data (staff: "
        "`user_id`'s).",
    )
    def post(self, request) -> Response:
        from django.contrib.auth import get_user_model

        from core.api.errors import NotFound
        from security.redaction.request import scope_of_user

        data = _validated(request, UserRedactionRequestSerializer)
        user = request.user
        user_id = data.pop("user_id", None)
        if user_id is not None and user_id != user.pk:
            other = get_user_model().objects.filter(pk=user_id).first() if user.is_staff else None
            if other is None:
                raise NotFound("no such user")
            user = other
        return _redact(request, scope_of_user(user), data)


class RedactionDetailApi(APIView):
    @extend_schema(
        operation_id="redactions_retrieve",
        responses={200: RedactionSerializer, **ERRORS},
        description="A redaction job's report: steps, counts, verification, exports on "
        "record. Its creator or staff.",
    )
    def get(self, request, redaction_id: str) -> Response:
        from core.api.errors import NotFound
        from security.models import Redaction
        from security.redaction import jobs

        row = Redaction.objects.filter(pk=redaction_id).first()
        if row is None or not (request.user.is_staff or row.actor_id == request.user.pk):
            raise NotFound("no such redaction")
        return Response(jobs.report(row))
