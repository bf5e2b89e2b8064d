"""Cursor pagination in a stable order (seq, ordinal or id), page size `limit` up to 1,000."""

from rest_framework.pagination import CursorPagination


class SequencePagination(CursorPagination):
    page_size = 100
    page_size_query_param = "limit"
    max_page_size = 1000
    ordering = "seq"


class OrdinalPagination(SequencePagination):
    ordering = "ordinal"


class IdPagination(SequencePagination):
    ordering = "-id"
