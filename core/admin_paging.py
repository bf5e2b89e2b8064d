"""A paginator for the admin's big append-only tables that never counts the whole table.

`show_full_result_count = False` only removes Django's second count; the paginator still
runs `SELECT COUNT(*)` over the unfiltered table on every page view, which is a full scan
on PostgreSQL. Unfiltered, we use the largest primary key instead (one index lookup):
messages, parts and lineage are never deleted, so it is the row count up to gaps left by
rolled-back inserts. Filtered lists (by conversation, role, ...) and tables keyed by text
(summaries, large files: far fewer rows) are counted exactly.
"""

from __future__ import annotations

from django.core.paginator import Paginator
from django.db.models import Max
from django.utils.functional import cached_property


class EstimatedCountPaginator(Paginator):
    @cached_property
    def count(self) -> int:
        queryset = self.object_list
        query = getattr(queryset, "query", None)
        integer_key = query is not None and queryset.model._meta.pk.get_internal_type().endswith(
            "AutoField"
        )
        if not integer_key or query.where or query.distinct:
            return super().count
        return queryset.model._default_manager.aggregate(top=Max("pk"))["top"] or 0
