"""Cursor pagination in a stable order (seq, ordinal or id), page size `limit` up to 1,000."""

import re

from rest_framework.exceptions import NotFound
from rest_framework.pagination import CursorPagination

from core.api.errors import InvalidInput

_DIGITS = re.compile(r"^[0-9]{1,4000}\Z")  # int() refuses longer


class SequencePagination(CursorPagination):
    page_size = 100
    page_size_query_param = "limit"
    max_page_size = 1000
    ordering = "seq"

    def get_page_size(self, request):
        # DRF falls back to the default page size for `limit=abc` or `limit=0`; the
        # contract says limit is an integer from 1, so anything else is a 400.
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return self.page_size
        limit = int(raw) if _DIGITS.match(raw) else 0
        if limit < 1:
            raise InvalidInput(
                "limit must be an integer from 1 (up to 1,000; larger is clamped)",
                extra={"field": "limit"},
            )
        return min(limit, self.max_page_size)

    def decode_cursor(self, request):
        # Every ordering here is an integer column: a forged position ("p=abc") would
        # otherwise reach the query and fail there as a 500.
        cursor = super().decode_cursor(request)
        if cursor is not None and cursor.position is not None:
            try:
                int(cursor.position)
            except ValueError:
                raise NotFound(self.invalid_cursor_message) from None
        return cursor


class OrdinalPagination(SequencePagination):
    ordering = "ordinal"


class IdPagination(SequencePagination):
    ordering = "-id"
