"""Import and export API: upload a file to import in the background and follow its
progress; export a conversation as JSONL, Anthropic or OpenAI messages."""

from __future__ import annotations

import json

from django.http import HttpResponse, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.parsers import BaseParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from conversations.selectors import conversation_get_for_user
from core.api.errors import InvalidInput
from core.api.pagination import IdPagination
from core.api.schema import CURSOR_PARAMETERS, ERRORS, WRITE_ERRORS, ErrorSerializer
from importers import exporters, jobs, selectors, serializers
from importers.watch import mirror


class ImportCreateApi(APIView):
    parser_classes = [MultiPartParser]

    @extend_schema(
        operation_id="imports_create",
        request={"multipart/form-data": serializers.ImportUploadSerializer},
        responses={202: serializers.ImportJobSerializer, **WRITE_ERRORS},
        description=(
            "Upload a file to import for the authenticated user (formats: claude-code, "
            "codex, opencode, gemini, anthropic, openai, jsonl, lossless-claw). The import runs as a background job: "
            "poll `GET /api/v1/imports/{id}/` for its state, progress and per-line errors. "
            "The upload size is capped by LCM_MAX_REQUEST_BYTES; import bigger files with "
            "`manage.py lcm_import`."
        ),
    )
    def post(self, request):
        body = serializers.ImportUploadSerializer(data=request.data)
        if not body.is_valid():
            field, problems = next(iter(body.errors.items()))
            raise InvalidInput(f"{field}: {problems[0]}", extra={"field": field})
        data = body.validated_data
        job = jobs.import_job_create(
            owner=request.user,
            format=data["format"],
            upload=data["file"],
            session_id=data.get("session_id") or "",
            dry_run=data["dry_run"],
        )
        job.refresh_from_db()  # a synchronous queue (tests) has already run it
        return Response(serializers.ImportJobSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class _RawBytes(BaseParser):
    media_type = "application/octet-stream"

    def parse(self, stream, media_type=None, parser_context=None):
        return stream.read() if stream is not None else b""


class WatchReceiveApi(APIView):
    """The receiving end of `lcm_watch --server` (importers/watch/mirror.py)."""

    parser_classes = [_RawBytes]

    @extend_schema(
        operation_id="imports_watch_create",
        parameters=[
            OpenApiParameter(
                "path",
                {"type": "string", "pattern": mirror.PATH_PATTERN, "maxLength": 4000},
                required=True,
                description="The file as the watcher names it: `<store>/<path in the store>`, "
                "store one of claude-code, codex/sessions, codex/archived_sessions, opencode, "
                "gemini.",
            ),
            OpenApiParameter(
                "mode",
                str,
                required=True,
                enum=["append", "replace", "delete", "import"],
                description="append the body at `offset`; replace the file with the body; "
                "delete the mirror's copy; import the session `path` from the mirror.",
            ),
            OpenApiParameter(
                "offset",
                {"type": "integer", "minimum": 0},
                description="append: the byte the body starts at.",
            ),
        ],
        request={"application/octet-stream": OpenApiTypes.BINARY},
        responses={
            200: serializers.WatchReceiveSerializer,
            409: OpenApiResponse(
                ErrorSerializer,
                description="`offset_ahead`: the mirror holds fewer bytes (`extra.size`); "
                "send from there. `not_readable`: the mirrored session cannot be read now "
                "(sent mid-save); send it again.",
            ),
            **WRITE_ERRORS,
        },
        description=(
            "Mirror a piece of a coding-agent session file for the authenticated user, or "
            "import a mirrored session (docs/capture.md, remote watcher). An append above "
            "the mirror's size is refused (409 `offset_ahead`, `extra.size`: send from "
            "there); one below it replaces what follows (a retried piece). Importing again "
            "adds only what is new."
        ),
    )
    def post(self, request):
        query = serializers.WatchReceiveQuerySerializer(data=request.query_params)
        if not query.is_valid():
            field, problems = next(iter(query.errors.items()))
            raise InvalidInput(f"{field}: {problems[0]}", extra={"field": field})
        params = query.validated_data
        data = request.data if params["mode"] in ("append", "replace") else b""
        data = data or b""  # an empty body parses as an empty form
        if not isinstance(data, bytes):
            raise InvalidInput("the body must be application/octet-stream bytes")
        result = mirror.receive(
            user=request.user,
            relative=params["path"],
            mode=params["mode"],
            offset=params["offset"],
            data=data,
        )
        return Response(result)


class ImportDetailApi(APIView):
    @extend_schema(
        operation_id="imports_retrieve",
        responses={200: serializers.ImportJobSerializer, **ERRORS},
        description="State, progress, report and per-line errors of an import.",
    )
    def get(self, request, job_id: int):
        job = selectors.import_job_get_for_user(user=request.user, job_id=job_id)
        return Response(serializers.ImportJobSerializer(job).data)


class _ByNewestImport(IdPagination):
    ordering = "-pk"  # the import row's key is its conversation's id


class AgentSessionListApi(APIView):
    @extend_schema(
        operation_id="imports_sessions_list",
        parameters=[
            OpenApiParameter(name, str, description=description)
            for name, description in (
                ("agent", "Only sessions of this agent: claude-code, codex, opencode, gemini."),
                ("cwd", "Only sessions run in this project directory (exact)."),
                ("git_branch", "Only sessions on this git branch (exact)."),
                ("model", "Only sessions whose model contains this text."),
            )
        ]
        + list(CURSOR_PARAMETERS),
        responses={200: serializers.AgentSessionPageSerializer, **ERRORS},
        description=(
            "The authenticated user's imported coding-agent sessions (Claude Code, Codex, "
            "OpenCode, Gemini CLI) with what each agent said about them: version, project "
            "directory, git branch, model, first and last times (docs/capture.md)."
        ),
    )
    def get(self, request):
        filters = {}
        for name in ("agent", "cwd", "git_branch", "model"):
            value = request.query_params.get(name, "")
            if "\x00" in value:
                raise InvalidInput(f"{name} contains a NUL character", extra={"field": name})
            filters[name] = value
        rows = selectors.agent_sessions_for_user(user=request.user, **filters)
        paginator = _ByNewestImport()
        page = paginator.paginate_queryset(rows, request, view=self)
        return paginator.get_paginated_response(
            serializers.AgentSessionSerializer(page, many=True).data
        )


class _FormatIsOurs(DefaultContentNegotiation):
    """`?format=` names the export format here, not a DRF renderer."""

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


class ConversationExportApi(APIView):
    content_negotiation_class = _FormatIsOurs

    @extend_schema(
        operation_id="conversations_export",
        parameters=[
            OpenApiParameter(
                "format",
                str,
                enum=list(exporters.FORMATS),
                description="jsonl (default; lossless, one message per line), anthropic "
                "(a Messages request body) or openai (Chat Completions messages).",
            )
        ],
        responses={
            (200, "application/x-ndjson"): OpenApiResponse(
                OpenApiTypes.STR, description="format=jsonl: one JSON message per line."
            ),
            (200, "application/json"): OpenApiResponse(
                OpenApiTypes.OBJECT,
                description="format=anthropic or openai: a JSON object of messages.",
            ),
            **ERRORS,
        },
    )
    def get(self, request, conversation_id: int):
        conversation = conversation_get_for_user(user=request.user, conversation_id=conversation_id)
        query = serializers.ExportFormatSerializer(data=request.query_params)
        # DRF reads an empty form value as "not given": `?format=` must not mean jsonl.
        if request.query_params.get("format") == "" or not query.is_valid():
            raise InvalidInput(
                f"format must be one of: {', '.join(exporters.FORMATS)}",
                extra={"field": "format"},
            )
        fmt = query.validated_data["format"]
        name = f"conversation-{conversation.pk}"
        if fmt == "jsonl":
            response = StreamingHttpResponse(
                exporters.export_jsonl(conversation), content_type="application/x-ndjson"
            )
            response["Content-Disposition"] = f'attachment; filename="{name}.jsonl"'
            return response
        body = (
            exporters.export_anthropic(conversation)
            if fmt == "anthropic"
            else exporters.export_openai(conversation)
        )
        response = HttpResponse(
            json.dumps(body, ensure_ascii=False), content_type="application/json"
        )
        response["Content-Disposition"] = f'attachment; filename="{name}.{fmt}.json"'
        return response
