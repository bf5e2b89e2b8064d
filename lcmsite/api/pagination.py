"""Cursor pagination in a stable order (seq, ordinal or id), page size `limit` up to 1,000."""

from rest_framework.exceptions import NotFound
from rest_framework.pagination import CursorPagination


class SequencePagination(CursorPagination):
    page_size = 100
    page_size_query_param = "limit"
    max_page_size = 1000
    ordering = "seq"

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
