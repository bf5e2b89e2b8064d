"""GET /api/v1/files/{id}/ (metadata and exploration summary) and
GET /api/v1/files/{id}/content/?offset=&limit= (the original bytes, range-limited)."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from conversations.largefiles import selectors
from conversations.largefiles.serializers import LargeFileSerializer
from lcmsite.api.errors import InvalidInput


class LargeFileDetailApi(APIView):
    @extend_schema(operation_id="files_retrieve", responses=LargeFileSerializer)
    def get(self, request, file_id: str):
        large_file = selectors.large_file_get_for_user(user=request.user, file_id=file_id)
        return Response(LargeFileSerializer(large_file).data)


def _int_param(request, name: str, default: int, minimum: int, maximum: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    if not raw.isascii() or not raw.isdigit() or not minimum <= int(raw) <= maximum:
        raise InvalidInput(
            f"{name} must be an integer from {minimum} to {maximum}",
            extra={"field": name, "minimum": minimum, "maximum": maximum},
        )
    return int(raw)


class LargeFileContentApi(APIView):
    @extend_schema(
        operation_id="files_content",
        parameters=[
            OpenApiParameter("offset", int, description="First byte to return (default 0)."),
            OpenApiParameter(
                "limit",
                int,
                description="Most bytes to return: 1 to LCM_FILE_PREVIEW_BYTES (the default).",
            ),
        ],
        responses={
            (200, "application/octet-stream"): OpenApiResponse(
                OpenApiTypes.BINARY,
                description=(
                    "The stored bytes, raw, with the file's MIME type. Headers: "
                    "X-LCM-File-Size (total bytes), X-LCM-Offset, and X-LCM-Next-Offset "
                    "when more bytes follow."
                ),
            )
        },
    )
    def get(self, request, file_id: str):
        large_file = selectors.large_file_get_for_user(user=request.user, file_id=file_id)
        cap = settings.LCM_FILE_PREVIEW_BYTES
        offset = _int_param(request, "offset", 0, 0, 2**62)
        limit = _int_param(request, "limit", cap, 1, cap)
        data = selectors.large_file_read(large_file=large_file, offset=offset, limit=limit)
        mime = large_file.mime_type or "application/octet-stream"
        if mime.startswith("text/"):
            mime += "; charset=utf-8"
        response = HttpResponse(data, content_type=mime)
        response["X-LCM-File-Size"] = str(large_file.byte_size)
        response["X-LCM-Offset"] = str(offset)
        if offset + len(data) < large_file.byte_size:
            response["X-LCM-Next-Offset"] = str(offset + len(data))
        # The bytes are whatever a user sent: never let a browser run them on this origin.
        response["Content-Disposition"] = f'attachment; filename="{large_file.id}"'
        response["X-Content-Type-Options"] = "nosniff"
        response["Content-Security-Policy"] = "sandbox; default-src 'none'"
        return response
