"""Schema pieces every app's API shares: the one error shape and cursor page envelopes,
so the OpenAPI document says what clients really receive."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers


class ErrorSerializer(serializers.Serializer):
    code = serializers.CharField(help_text="Stable machine-readable code, e.g. `invalid`.")
    message = serializers.CharField(help_text="What went wrong, for a person.")
    extra = serializers.DictField(help_text="Details such as `field`, `index` or `limit`.")

    class Meta:
        ref_name = "Error"


def _error(description: str) -> OpenApiResponse:
    return OpenApiResponse(ErrorSerializer, description=description)


ERRORS = {
    400: _error("Bad input; nothing was stored."),
    401: _error("Not authenticated."),
    404: _error("No such resource, or not visible to this user."),
}
WRITE_ERRORS = {**ERRORS, 413: _error("Request body over LCM_MAX_REQUEST_BYTES.")}

CURSOR_PARAMETERS = [
    OpenApiParameter("cursor", str, description="Opaque cursor from a `next`/`previous` link."),
    OpenApiParameter("limit", int, description="Page size, up to 1,000 (larger is clamped)."),
]


def cursor_page(name: str, item: type[serializers.Serializer]) -> type[serializers.Serializer]:
    """A uniquely named page serializer: `{next, previous, results: [item]}`."""
    return type(
        name,
        (serializers.Serializer,),
        {
            "next": serializers.URLField(allow_null=True),
            "previous": serializers.URLField(allow_null=True),
            "results": item(many=True),
        },
    )
