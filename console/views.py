"""Server-rendered console pages: the sessions list (and the create form), the chat page,
the fragments its panels load (turn, history, branches, pins, pending), the header's status
JSON, and "what the model saw" per turn.

Each view asks `selectors.session_for_user` first (another user's session is a 404). The
chat itself (sending, streaming, fork, rollback, pins, commit, memory) goes through the
JSON API from console.js, with the session cookie and the CSRF token.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from console import presenters, selectors
from console.forms import SessionCreateForm, model_choices, offline_only
from core.api.errors import LcmError

_MAX_PARAM = 2**53


def _int_param(request: HttpRequest, name: str) -> int | None:
    raw = request.GET.get(name, "")
    try:
        value = int(raw) if raw else None
    except ValueError:
        return None
    return value if value is None or abs(value) <= _MAX_PARAM else None


@require_http_methods(["GET", "POST"])
@login_required
def session_list(request: HttpRequest) -> HttpResponse:
    form = SessionCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            session = form.save(owner=request.user)
        except LcmError as error:
            form.add_error(None, error.message)
        else:
            return redirect("console:chat", session_id=session.pk)
    page = max(1, min(_int_param(request, "page") or 1, 100_000))
    rows, has_more = selectors.session_list_page(user=request.user, page=page)
    status = 400 if request.method == "POST" else 200
    return render(
        request,
        "console/session_list.html",
        {
            "sessions": rows,
            "form": form,
            "page": page,
            "has_more": has_more,
            "offline_only": offline_only(),
        },
        status=status,
    )


def _chat_context(request: HttpRequest, session_id: str) -> dict:
    session = selectors.session_for_user(user=request.user, session_id=session_id)
    branch = selectors.branch_of(session=session)
    return {"session": session, "branch": branch}


@require_GET
@login_required
def chat(request: HttpRequest, session_id: str) -> HttpResponse:
    ctx = _chat_context(request, session_id)
    session, branch = ctx["session"], ctx["branch"]
    before = _int_param(request, "before")
    turns, has_more = selectors.turns_page(branch=branch, before=before)
    status = selectors.status(session=session, branch=branch)
    running = None
    if status.running_turn_id:
        running = next((t for t in turns if t.pk == status.running_turn_id), None)
    return render(
        request,
        "console/chat.html",
        {
            **ctx,
            "turns": [presenters.turn_view(t) for t in turns if t is not running],
            "running": running,
            "running_text": presenters.text_of(running.user_message) if running else "",
            "has_more": has_more,
            "older": turns[0].turn_seq if turns and has_more else None,
            "before": before,
            "status": status,
            "models": model_choices(),
            "offline_only": offline_only(),
            "tools_modes": ["disabled", "parse_only", "enabled"],
        },
    )


@require_GET
@login_required
def status_json(request: HttpRequest, session_id: str) -> JsonResponse:
    ctx = _chat_context(request, session_id)
    return JsonResponse(selectors.status(session=ctx["session"], branch=ctx["branch"]).as_dict())


@require_GET
@login_required
def turn_fragment(request: HttpRequest, session_id: str, turn_id: str) -> HttpResponse:
    session = selectors.session_for_user(user=request.user, session_id=session_id)
    turn = selectors.turn_for_session(session=session, turn_id=turn_id)
    return render(
        request,
        "console/_turn.html",
        {"session": session, "t": presenters.turn_view(turn), "branch": turn.branch},
    )


@require_GET
@login_required
def history_fragment(request: HttpRequest, session_id: str) -> HttpResponse:
    ctx = _chat_context(request, session_id)
    turns, has_more = selectors.turns_page(
        branch=ctx["branch"], before=_int_param(request, "before")
    )
    return render(
        request,
        "console/_history.html",
        {
            **ctx,
            "turns": [presenters.turn_view(t) for t in reversed(turns)],
            "older": turns[0].turn_seq if turns and has_more else None,
        },
    )


@require_GET
@login_required
def branches_fragment(request: HttpRequest, session_id: str) -> HttpResponse:
    ctx = _chat_context(request, session_id)
    return render(
        request,
        "console/_branches.html",
        {
            **ctx,
            "tree": selectors.branch_tree(session=ctx["session"]),
            "states": selectors.states(branch=ctx["branch"]),
        },
    )


@require_GET
@login_required
def pins_fragment(request: HttpRequest, session_id: str) -> HttpResponse:
    ctx = _chat_context(request, session_id)
    return render(
        request,
        "console/_pins.html",
        {**ctx, "pins": selectors.pinned_facts(branch=ctx["branch"])},
    )


@require_GET
@login_required
def pending_fragment(request: HttpRequest, session_id: str) -> HttpResponse:
    ctx = _chat_context(request, session_id)
    return render(
        request,
        "console/_pending.html",
        {
            **ctx,
            "pending": [
                presenters.turn_view(t) for t in selectors.pending_turns(branch=ctx["branch"])
            ],
        },
    )


@require_GET
@login_required
def turn_context(request: HttpRequest, session_id: str, turn_id: str) -> HttpResponse:
    """What the model saw for one turn: the assembled context as sent, with its token bar,
    shrink steps, retrieval candidates, latency breakdown and provider usage."""
    session = selectors.session_for_user(user=request.user, session_id=session_id)
    turn = selectors.turn_for_session(session=session, turn_id=turn_id)
    context = turn.context or {}
    segments, total, allowance = presenters.token_bar(context)
    view = presenters.turn_view(turn)
    return render(
        request,
        "console/turn_context.html",
        {
            "session": session,
            "branch": turn.branch,
            "t": view,
            "context": context,
            "segments": segments,
            "total_tokens": total,
            "allowance": allowance,
            "retrieval": presenters.retrieval_rows(turn),
            "budget": [
                (k, v) for k, v in (context.get("budget") or {}).items() if k != "retrieval"
            ],
            "retrieval_stats": [
                (k, v)
                for k, v in ((context.get("budget") or {}).get("retrieval") or {}).items()
                if v not in (None, "")
            ],
            "timings": presenters.timings(turn),
            "usage": presenters.usage_rows(view.steps),
            "stable_tokens": presenters.stable_prefix_tokens(context),
            "receipts": presenters.step_receipts(view.steps),
            "chat_url": reverse("console:chat", args=[session.pk]),
        },
    )
