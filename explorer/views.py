"""Server-rendered explorer pages. Each view parses its input, asks the access checkpoint
for the conversation (404 for anyone who may not see it), calls selectors, renders.

Untrusted text (message, summary and file content, titles, file names) only ever reaches
the page through Django's auto-escaping; the DAG data goes through `json_script`.
"""

from __future__ import annotations

import datetime as dt
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.dateparse import parse_date
from django.views.decorators.http import require_GET

from conversations.models import Conversation, SummaryKind
from conversations.selectors import conversation_get_for_user
from core.api.errors import InvalidInput, LcmError, NotFound
from explorer import selectors
from retrieval.grep import MODES, SCOPES, SORTS, GrepRequest, grep_for_user
from retrieval.selectors import covering_summaries, expand_for_user

# Query-string numbers beyond this are treated as absent, and ids beyond a bigint do not
# exist: the database would refuse them (an error, not an answer).
_MAX_PARAM = 2**53
_MAX_ID = 2**63 - 1
_MAX_PAGE = 100_000


def _conversation(request: HttpRequest, conversation_id: int) -> Conversation:
    if conversation_id > _MAX_ID:
        raise Http404("conversation not found")
    try:
        return conversation_get_for_user(user=request.user, conversation_id=conversation_id)
    except NotFound:
        raise Http404("conversation not found") from None


def _int_param(request: HttpRequest, name: str, default: int | None = None) -> int | None:
    raw = request.GET.get(name, "")
    try:
        value = int(raw) if raw else default
    except ValueError:
        return default
    return value if value is None or abs(value) <= _MAX_PARAM else default


def _page_param(request: HttpRequest) -> int:
    return min(max(1, _int_param(request, "page", 1) or 1), _MAX_PAGE)


def _context_panel(conversation: Conversation) -> dict:
    """What `_context_panel.html` shows: the context bar and the first page of items."""
    items, more_items = selectors.context_items_page(conversation=conversation)
    return {
        "conversation": conversation,
        "bar": selectors.context_bar(conversation=conversation),
        "context_items": items,
        "more_context_items": more_items,
    }


@require_GET
@login_required
def conversation_list(request: HttpRequest) -> HttpResponse:
    query = request.GET.get("q", "").replace("\x00", "").strip()[:255]
    page = _page_param(request)
    agent = request.GET.get("agent", "").replace("\x00", "").strip()[:32]
    project = request.GET.get("project", "").replace("\x00", "").strip()[:1000]
    rows, has_more = selectors.conversation_list_page(
        user=request.user, query=query, page=page, agent=agent, project=project
    )
    filters = urlencode({"q": query, "agent": agent, "project": project})
    return render(
        request,
        "explorer/conversation_list.html",
        {
            "conversations": rows,
            "query": query,
            "agent": agent,
            "project": project,
            "agents": selectors.agent_choices(user=request.user),
            "filters": filters,
            "page": page,
            "has_more": has_more,
        },
    )


@require_GET
@login_required
def conversation_detail(request: HttpRequest, conversation_id: int) -> HttpResponse:
    conversation = _conversation(request, conversation_id)
    from_seq = _int_param(request, "from")
    seq = _int_param(request, "seq")
    if seq is not None:
        from_seq = selectors.page_start_for_seq(seq)
    timeline = selectors.timeline_page(conversation=conversation, from_seq=from_seq)
    message_ids = [m.pk for m in timeline.messages]
    # message id -> covering context summary id, or None when the message is itself in
    # the context (absent: neither, only for a moment inside a compaction write).
    covering = covering_summaries(conversation_id=conversation.pk, message_ids=message_ids)
    compactions = selectors.agent_compactions(conversation)
    ends = {c.last_seq: c for c in compactions}
    for message in timeline.messages:
        message.covering_summary_id = covering.get(message.pk)
        message.in_context = message.pk in covering and covering[message.pk] is None
        message.compaction_after = ends.get(message.seq)
    return render(
        request,
        "explorer/conversation_detail.html",
        {
            **_context_panel(conversation),
            "timeline": timeline,
            "highlight_seq": seq,
            "agent_compactions": compactions,
        },
    )


@require_GET
@login_required
def context_panel_fragment(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """The context bar and the first page of context items, refreshed after an action."""
    conversation = _conversation(request, conversation_id)
    return render(request, "explorer/_context_panel.html", _context_panel(conversation))


@require_GET
@login_required
def context_items_fragment(request: HttpRequest, conversation_id: int) -> HttpResponse:
    conversation = _conversation(request, conversation_id)
    after = max(0, _int_param(request, "after", 0) or 0)
    items, more = selectors.context_items_page(conversation=conversation, after=after)
    return render(
        request,
        "explorer/_context_items.html",
        {
            "conversation": conversation,
            "context_items": items,
            "more_context_items": more,
            # ordinal of the first item the assembler includes (older ones are dropped)
            "first_included": _int_param(request, "first"),
        },
    )


@require_GET
@login_required
def summary_dag(request: HttpRequest, conversation_id: int) -> HttpResponse:
    conversation = _conversation(request, conversation_id)
    dag = selectors.conversation_dag(conversation=conversation)
    focus_seq = _int_param(request, "message")
    path, covering_id = [], None
    if focus_seq is not None:
        path, covering_id = selectors.message_lineage(conversation=conversation, seq=focus_seq)
    selected = request.GET.get("summary", "")[:32]
    return render(
        request,
        "explorer/summary_dag.html",
        {
            "conversation": conversation,
            "dag": dag,
            "dag_json": {
                **dag.as_json(),
                "path": path,
                "covering": covering_id,
                "selected": selected or covering_id,
                "detailUrl": reverse(
                    "explorer:summary-detail", args=[conversation.pk, "SUMMARY_ID"]
                ),
                "expandUrl": reverse(
                    "explorer:summary-expand", args=[conversation.pk, "SUMMARY_ID"]
                ),
            },
            "focus_seq": focus_seq,
        },
    )


@require_GET
@login_required
def summary_detail_fragment(
    request: HttpRequest, conversation_id: int, summary_id: str
) -> HttpResponse:
    conversation = _conversation(request, conversation_id)
    detail = selectors.summary_detail(conversation=conversation, summary_id=summary_id)
    if detail is None:
        raise Http404("summary not found")
    return render(
        request, "explorer/_summary_detail.html", {"conversation": conversation, "d": detail}
    )


@require_GET
@login_required
def summary_expand_fragment(
    request: HttpRequest, conversation_id: int, summary_id: str
) -> HttpResponse:
    """One level down, in place, through the retrieval expand service (the same one the
    API and the model's tools use, with its token cap): a condensed summary's sources, or
    a leaf's source messages."""
    conversation = _conversation(request, conversation_id)
    detail = selectors.summary_detail(conversation=conversation, summary_id=summary_id)
    if detail is None:
        raise Http404("summary not found")
    is_leaf = detail.summary.kind == SummaryKind.LEAF
    expansion = expand_for_user(
        user=request.user,
        summary_id=detail.summary.pk,
        depth=1,
        include_messages=is_leaf,
        token_cap=settings.LCM_MAX_EXPAND_TOKENS,
    )
    return render(
        request,
        "explorer/_summary_expand.html",
        {
            "conversation": conversation,
            "d": detail,
            "is_leaf": is_leaf,
            "summaries": [s for s in expansion.summaries if s["id"] != detail.summary.pk],
            "messages": expansion.messages,
            "expansion": expansion,
        },
    )


@require_GET
@login_required
def file_list(request: HttpRequest) -> HttpResponse:
    page = _page_param(request)
    rows, has_more = selectors.file_list_page(user=request.user, page=page)
    return render(
        request, "explorer/file_list.html", {"files": rows, "page": page, "has_more": has_more}
    )


@require_GET
@login_required
def file_detail(request: HttpRequest, file_id: str) -> HttpResponse:
    large_file = selectors.file_get_for_user(user=request.user, file_id=file_id[:32])
    if large_file is None:
        raise Http404("file not found")
    preview, truncated = selectors.file_preview(large_file=large_file)
    return render(
        request,
        "explorer/file_detail.html",
        {"file": large_file, "preview": preview, "truncated": truncated},
    )


def _day_start(raw: str, field: str) -> dt.datetime | None:
    if not raw:
        return None
    try:
        day = parse_date(raw)
    except ValueError:  # well formed, impossible (2026-13-45)
        day = None
    if day is None:
        raise InvalidInput(f"{field} must be a date (YYYY-MM-DD)", extra={"field": field})
    return dt.datetime.combine(day, dt.time.min, tzinfo=dt.UTC)


@require_GET
@login_required
def conversation_search(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """The grep form over one conversation; hits link into the timeline and the DAG."""
    conversation = _conversation(request, conversation_id)
    form = {
        "q": request.GET.get("q", ""),
        "mode": request.GET.get("mode", "full_text"),
        "scope": request.GET.get("scope", "both"),
        "sort": request.GET.get("sort", "recency"),
        "since": request.GET.get("since", ""),
        "before": request.GET.get("before", ""),
    }
    results, error, status = None, None, 200
    if "\x00" in form["q"]:
        error, status = "the query must not contain NUL characters", 400
    elif form["q"]:
        try:
            since = _day_start(form["since"], "since")
            before = _day_start(form["before"], "before")
            if before is not None:
                before += dt.timedelta(days=1)  # the form's "until" day is inclusive
            results = grep_for_user(
                user=request.user,
                request=GrepRequest(
                    query=form["q"],
                    mode=form["mode"],
                    scope=form["scope"],
                    sort=form["sort"],
                    conversation_id=conversation.pk,
                    since=since,
                    before=before,
                ),
            )
        except LcmError as problem:
            error, status = problem.message, problem.status
    return render(
        request,
        "explorer/search.html",
        {
            "conversation": conversation,
            "form": form,
            "results": results,
            "error": error,
            "modes": MODES,
            "scopes": list(SCOPES),
            "sorts": SORTS,
        },
        status=status,
    )
