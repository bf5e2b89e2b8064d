"""The explorer's pages over receipts (docs/receipts.md): a conversation's call timeline
(a chart and a table: tokens in and out, the cache-readable share, cost, latency), one
receipt (every item sent and why, what came back, the diff against the previous call),
and the calls that saw one message or summary. Each view asks the access checkpoint
first."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from conversations.models import Message
from conversations.selectors import conversation_get_for_user
from core.api.errors import NotFound
from explorer import call_chart
from receipts import selectors
from receipts.diff import receipt_diff
from receipts.models import Receipt

_MAX_CALLS = 500  # the newest calls the timeline draws


def _conversation(request: HttpRequest, conversation_id: int):
    try:
        return conversation_get_for_user(user=request.user, conversation_id=conversation_id)
    except NotFound:
        raise Http404("conversation not found") from None


def _rows(receipts: list[Receipt]) -> list[dict]:
    return [
        {"r": r, "n": n, "share": call_chart.cache_share(r)}
        for n, r in enumerate(receipts, start=1)
    ]


@require_GET
@login_required
def call_timeline(request: HttpRequest, conversation_id: int) -> HttpResponse:
    conversation = _conversation(request, conversation_id)
    receipts = list(
        selectors.receipts_of_conversation(conversation_id=conversation.pk).reverse()[:_MAX_CALLS]
    )[::-1]
    return render(
        request,
        "explorer/calls.html",
        {
            "conversation": conversation,
            "rows": _rows(receipts),
            "chart": call_chart.columns(receipts),
            "chart_width": call_chart.WIDTH,
            "chart_height": call_chart.TOKENS_HEIGHT + 10 + call_chart.LATENCY_HEIGHT,
            "total_cost": sum(r.cost_usd or 0 for r in receipts),
            "sizes": selectors.conversation_receipt_bytes(conversation_id=conversation.pk),
        },
    )


@require_GET
@login_required
def receipt_page(request: HttpRequest, conversation_id: int, receipt_id: str) -> HttpResponse:
    conversation = _conversation(request, conversation_id)
    receipt = Receipt.objects.filter(pk=receipt_id, conversation_id=conversation.pk).first()
    if receipt is None:
        raise Http404("receipt not found")
    previous = selectors.receipt_previous(receipt)
    return render(
        request,
        "explorer/receipt.html",
        {
            "conversation": conversation,
            "d": selectors.receipt_detail(receipt),
            "previous": previous,
            "diff": receipt_diff(receipt, previous) if previous else None,
        },
    )


@require_GET
@login_required
def calls_that_saw(
    request: HttpRequest, conversation_id: int, kind: str, item_id: str
) -> HttpResponse:
    """The calls whose request held a message (by seq) or a summary (by id)."""
    conversation = _conversation(request, conversation_id)
    if kind == "message":
        found = Message.objects.filter(
            conversation=conversation, seq=int(item_id) if item_id.isdigit() else -1
        )
        message = found.values_list("id", flat=True).first()
        if message is None:
            raise Http404("message not found")
        key: int | str = message
        label = f"message #{item_id}"
    elif kind == "summary":
        key, label = item_id, f"summary {item_id}"
    else:
        raise Http404("unknown item kind")
    receipts = selectors.receipts_that_saw(conversation_id=conversation.pk, kind=kind, item_id=key)
    return render(
        request,
        "explorer/calls_that_saw.html",
        {"conversation": conversation, "label": label, "rows": _rows(receipts)},
    )
