"""Links from the admin into the explorer's pages (the same DAG and file views, with the
same access checkpoint). `format_html` escapes every value it interpolates."""

from __future__ import annotations

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html


@admin.display(description="explorer")
def conversation_links(obj) -> str:
    if obj.pk is None:
        return "-"
    return format_html(
        '<a href="{}">context and timeline</a> · <a href="{}">summary DAG</a> · '
        '<a href="{}">search</a>',
        reverse("explorer:conversation", args=[obj.pk]),
        reverse("explorer:dag", args=[obj.pk]),
        reverse("explorer:search", args=[obj.pk]),
    )


@admin.display(description="explorer")
def summary_links(obj) -> str:
    if obj.pk is None:
        return "-"
    return format_html(
        '<a href="{}?summary={}">show in the summary DAG</a>',
        reverse("explorer:dag", args=[obj.conversation_id]),
        obj.pk,
    )


@admin.display(description="explorer")
def file_links(obj) -> str:
    if obj.pk is None:
        return "-"
    return format_html(
        '<a href="{}">file page (preview, exploration summary)</a>',
        reverse("explorer:file", args=[obj.pk]),
    )
