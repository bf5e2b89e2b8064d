"""GET /api/v1/files/{id}/ (metadata and exploration summary) and
GET /api/v1/files/{id}/content/?offset=&limit= (the original bytes, range-limited; also
standard Range / If-None-Match requests, see ranges.py)."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.errors import InvalidInput, json_error
from core.api.schema import ERRORS, ErrorSerializer
from largefiles import ranges, selectors
from largefiles.serializers import LargeFileSerializer


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


_CONTENT_DESCRIPTION = (
    "The stored bytes, raw, with the file's MIME type, at most LCM_FILE_PREVIEW_BYTES per "
    "response. Two ways to read a part: `offset`/`limit`, or a standard `Range: bytes=a-b` "
    "header (also `bytes=a-` and `bytes=-n`), answered 206 with `Content-Range`; a range "
    "longer than LCM_FILE_PREVIEW_BYTES is shortened, and `Content-Range` says which bytes "
    "came (ask for the rest next). A range starting at or past the end is 416 with "
    "`Content-Range: bytes */SIZE`. Several ranges in one header, another unit or a "
    "malformed header are ignored (a 200 as without Range); `If-Range` with a different "
    "validator also gives a 200. Sending both Range and offset/limit is a 400. Every answer "
    "carries `ETag` (the quoted SHA-256: the content never changes) and "
    "`Accept-Ranges: bytes`; `If-None-Match` with that ETag (or `*`) is a 304 without a body."
)


class LargeFileContentApi(APIView):
    @extend_schema(
        operation_id="files_content",
        description=_CONTENT_DESCRIPTION,
        parameters=[
            OpenApiParameter(
                "offset",
                {"type": "integer", "minimum": 0, "maximum": 2**62},
                description="First byte to return (default 0).",
            ),
            OpenApiParameter(
                "limit",
                {"type": "integer", "minimum": 1, "maximum": settings.LCM_FILE_PREVIEW_BYTES},
                description="Most bytes to return: 1 to LCM_FILE_PREVIEW_BYTES (the default).",
            ),
            OpenApiParameter(
                "Range",
                str,
                OpenApiParameter.HEADER,
                description="One byte range, e.g. `bytes=0-1023`, `bytes=4096-`, `bytes=-500`.",
            ),
            OpenApiParameter(
                "If-None-Match",
                str,
                OpenApiParameter.HEADER,
                description="An ETag from an earlier answer: 304 when it still matches.",
            ),
            OpenApiParameter(
                "If-Range",
                str,
                OpenApiParameter.HEADER,
                description="Honour Range only if this is still the file's ETag.",
            ),
        ],
        responses={
            (200, "application/octet-stream"): OpenApiResponse(
                OpenApiTypes.BINARY,
                description=(
                    "The stored bytes, raw, with the file's MIME type. Headers: ETag, "
                    "Accept-Ranges, X-LCM-File-Size (total bytes), X-LCM-Offset, and "
                    "X-LCM-Next-Offset when more bytes follow."
                ),
            ),
            (206, "application/octet-stream"): OpenApiResponse(
                OpenApiTypes.BINARY,
                description=(
                    "The bytes of the one range asked for with `Range` (at most "
                    "LCM_FILE_PREVIEW_BYTES). Headers: Content-Range (`bytes a-b/SIZE`), "
                    "ETag, and the X-LCM-* headers of a 200."
                ),
            ),
            304: OpenApiResponse(description="Not modified: If-None-Match matched the ETag."),
            **ERRORS,
            416: OpenApiResponse(
                ErrorSerializer,
                description=(
                    "The range starts at or past the end of the file (or the file is empty). "
                    "Header: Content-Range: bytes */SIZE."
                ),
            ),
        },
    )
    def get(self, request, file_id: str):
        large_file = selectors.large_file_get_for_user(user=request.user, file_id=file_id)
        size = large_file.byte_size
        etag = ranges.etag_for(large_file.sha256)
        if ranges.none_match(request.headers.get("If-None-Match"), etag):
            return _with_validators(HttpResponse(status=304), etag)
        cap = settings.LCM_FILE_PREVIEW_BYTES
        offset = _int_param(request, "offset", 0, 0, 2**62)
        limit = _int_param(request, "limit", cap, 1, cap)
        wanted = None
        header = request.headers.get("Range")
        if header and ranges.range_applies(request.headers.get("If-Range"), etag):
            if {"offset", "limit"} & set(request.query_params):
                raise InvalidInput(
                    "send either a Range header or offset/limit, not both",
                    extra={"field": "Range"},
                )
            try:
                wanted = ranges.parse_range(header, size)
            except ranges.Unsatisfiable:
                response = json_error(
                    416,
                    "range_not_satisfiable",
                    f"range {header.strip()!r} is outside the file ({size} bytes)",
                    {"byte_size": size},
                )
                response["Content-Range"] = f"bytes */{size}"
                return _with_validators(response, etag)
        if wanted is not None:
            offset, limit = wanted.start, min(cap, wanted.end - wanted.start + 1)
        data = selectors.large_file_read(large_file=large_file, offset=offset, limit=limit)
        mime = large_file.mime_type or "application/octet-stream"
        if mime.startswith("text/"):
            mime += "; charset=utf-8"
        response = HttpResponse(data, content_type=mime, status=206 if wanted else 200)
        if wanted is not None:
            response["Content-Range"] = f"bytes {offset}-{offset + len(data) - 1}/{size}"
        response["X-LCM-File-Size"] = str(size)
        response["X-LCM-Offset"] = str(offset)
        if offset + len(data) < size:
            response["X-LCM-Next-Offset"] = str(offset + len(data))
        # The bytes are whatever a user sent: never let a browser run them on this origin.
        response["Content-Disposition"] = f'attachment; filename="{large_file.id}"'
        response["X-Content-Type-Options"] = "nosniff"
        response["Content-Security-Policy"] = "sandbox; default-src 'none'"
        return _with_validators(response, etag)


def _with_validators(response: HttpResponse, etag: str) -> HttpResponse:
    response["ETag"] = etag
    response["Accept-Ranges"] = "bytes"
    # Owner-only content: caches may keep it for this user but must revalidate (a cheap 304).
    response["Cache-Control"] = "private, no-cache"
    return response
