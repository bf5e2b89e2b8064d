"""HTTP adapters of the security app: hard delete (the DELETE method of the conversation
and session detail endpoints, joined to those apps' GET in `lcmsite/urls.py`), exports
and redactions (both background jobs: 202 with the job's URL)."""

from __future__ import annotations

from django.http import FileResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.errors import InvalidInput, LcmError, NotFound
from core.api.schema import ERRORS, ErrorSerializer
from security import export_jobs, exports, hard_delete
from security.export_store import archive_storage
from security.models import ExportJob, ExportState, Redaction
from security.serializers import (
    ExportJobSerializer,
    ExportRequestSerializer,
    HardDeleteResultSerializer,
    RedactionRequestSerializer,
    RedactionSerializer,
    UserRedactionRequestSerializer,
)


class _ZipOnly(DefaultContentNegotiation):
    """The archive is a zip whatever the client accepts (DRF's renderers are JSON)."""

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


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


class NotReady(LcmError):
    status = 409
    code = "not_ready"


class ArchiveGone(LcmError):
    status = 410
    code = "expired"


# The 202 answers name the job's URL in a header too.
LOCATION = OpenApiParameter(
    "Location",
    str,
    OpenApiParameter.HEADER,
    response=[202],
    description="The job's URL (the body's `url`).",
)


def _accepted(body: dict) -> Response:
    response = Response(body, status=202)
    response["Location"] = body["url"]
    return response


class ExportApi(APIView):
    @extend_schema(
        operation_id="exports_create",
        request=ExportRequestSerializer,
        parameters=[LOCATION],
        responses={
            202: ExportJobSerializer,
            **ERRORS,
            409: OpenApiResponse(
                ErrorSerializer, description="A branch conversation: export its session."
            ),
        },
        description="Export a conversation or a turn session as a full-fidelity archive "
        "(user-initiated, audited), built in the background: 202 with the job (its `url` "
        "and the `Location` header), whose `progress`, then `download`, say when the zip "
        "is ready; the same request again answers the same job. Owner or staff.",
    )
    def post(self, request):
        from conversations.selectors import conversation_get_for_user
        from turns.selectors import session_get_for_user

        serializer = ExportRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        if "conversation_id" in data:
            target = exports.conversation_target(
                conversation_get_for_user(
                    user=request.user, conversation_id=data["conversation_id"]
                )
            )
        else:
            target = exports.session_target(
                session_get_for_user(user=request.user, session_id=data["session_id"])
            )
        job, _ = export_jobs.export_submit(target=target, actor=request.user, via="api")
        job.refresh_from_db()  # a synchronous queue (tests) has already built it
        return _accepted(export_jobs.report(job))


def _job(model, request, job_id: str):
    """A job its creator or staff may read; anyone else's does not exist (404)."""
    job = model.objects.filter(pk=job_id).first()
    if job is None or not (request.user.is_staff or job.actor_id == request.user.pk):
        raise NotFound(f"no such {model._meta.verbose_name}")
    return job


class ExportDetailApi(APIView):
    @extend_schema(
        operation_id="exports_retrieve",
        responses={200: ExportJobSerializer, **ERRORS},
        description="An export job: state, progress, the archive's size, SHA-256 and "
        "manifest counts, and its `download` URL once done. Its creator or staff.",
    )
    def get(self, request, export_id: str) -> Response:
        return Response(export_jobs.report(_job(ExportJob, request, export_id)))


class ExportArchiveApi(APIView):
    content_negotiation_class = _ZipOnly

    @extend_schema(
        operation_id="exports_archive_retrieve",
        responses={
            (200, "application/zip"): OpenApiResponse(
                OpenApiTypes.BINARY,
                description="The archive (zip: manifest.json, tables/, transcripts/, files/, "
                "streams/; see docs/security.md).",
            ),
            **ERRORS,
            409: OpenApiResponse(
                ErrorSerializer,
                description="`not_ready`: still building, or failed (`extra.state`).",
            ),
            410: OpenApiResponse(
                ErrorSerializer,
                description="`expired`: deleted after "
                "LCM_EXPORT_KEEP_HOURS, or by a redaction or hard delete.",
            ),
        },  # fmt: skip
        description="Download a finished export's archive. Its creator or staff.",
    )
    def get(self, request, export_id: str):
        job = _job(ExportJob, request, export_id)
        if job.state == ExportState.EXPIRED:
            raise ArchiveGone(f"export {job.pk} was deleted: {job.error}")
        if job.state != ExportState.DONE:
            raise NotReady(f"export {job.pk} is {job.state}", extra={"state": job.state})
        handle = archive_storage().open(job.storage_key, "rb")
        return FileResponse(
            handle, as_attachment=True, filename=f"lcm-{job.target_kind}-{job.target_id}.zip",
            content_type="application/zip",
        )  # fmt: skip


REDACTION_RESPONSES = {
    202: RedactionSerializer,
    **ERRORS,
    409: OpenApiResponse(
        ErrorSerializer,
        description="`dry_run_required`: a literal of fewer than 8 characters or a regex may "
        "match everywhere; dry-run it first and name the dry run in `confirm_dry_run`.",
    ),
}
REDACTION_DESCRIPTION = (
    "Redact (docs/security.md, 'Redaction'): by message ids, one message's span, or a "
    "literal or regex, across the scope. The removed text becomes `[redacted: <reason> "
    "<id>]` in the messages and in everything derived (summaries regenerated up the DAG, "
    "memory units and vectors, full-text rows, large files, archive segments, journals, "
    "turn rows), then every place is scanned (`verification.occurrences` 0 is the proof; a "
    "job whose verify finds anything ends failed, listing the places). It runs in the "
    "background: 202 with the job (its `url` and the `Location` header: progress, then the "
    "report); the same request again answers the same job (a failed one resumes). "
    "`dry_run: true` plans only: the job's `plan` lists every place it would touch, with "
    "counts. Owner or staff."
)


def _validated(request, serializer_class=RedactionRequestSerializer) -> dict:
    serializer = serializer_class(data=request.data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


def _redact(request, scope, data: dict) -> Response:
    from security.redaction import jobs, queue
    from security.redaction.request import parse

    redaction = parse(data, scope)
    row, _ = queue.submit(redaction, actor=request.user, via="api")
    row.refresh_from_db()  # a synchronous queue (tests) has already run it
    return _accepted(jobs.report(row))


class ConversationRedactionApi(APIView):
    @extend_schema(
        operation_id="conversations_redact",
        parameters=[LOCATION],
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
        parameters=[LOCATION],
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
        parameters=[LOCATION],
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
        description="A redaction job: its state and progress, its plan (a dry run's "
        "result: the places it would touch, with counts), steps, verification and the "
        "exports on record. Its creator or staff.",
    )
    def get(self, request, redaction_id: str) -> Response:
        from security.redaction import jobs

        return Response(jobs.report(_job(Redaction, request, redaction_id)))
