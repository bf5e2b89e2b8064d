"""What a drop-in call's receipt names (docs/receipts.md): the thread's messages the client
sent, as stored; or, when the thread's context was assembled to fit the budget, the
summaries and messages it holds (the fresh tail marked) and the messages left out."""

from __future__ import annotations

from conversations.models import Message
from receipts.items import ItemRef


def receipt_context(*, thread, upstream, wire: str) -> dict:
    """Keyword arguments of `receipts.context.call_context` for one upstream call."""
    rows = list(
        Message.objects.filter(conversation_id=thread.conversation_id)
        .order_by("seq")
        .values_list("id", "token_count")
    )
    context = {
        "site": "dropin",
        "conversation_id": thread.conversation_id,
        "source": f"thread:{thread.pk}",
        "notes": {"wire": wire, "compacted": bool(upstream.compacted)},
        "budget": {"tokens": upstream.tokens},
    }
    if not upstream.compacted or upstream.items is None:
        context["items"] = [
            ItemRef(kind="message", id=pk, reason="input", tokens=t) for pk, t in rows
        ]
        return context
    items = [
        ItemRef(
            kind=d["type"],
            id=d["id"],
            reason="summary" if d["type"] == "summary" else ("tail" if d["tail"] else "history"),
            tokens=d["tokens"],
        )
        for d in upstream.items
    ]
    sent = {d["id"] for d in upstream.items if d["type"] == "message"}
    context["items"] = items
    context["left_out"] = [
        ItemRef(kind="message", id=pk, reason="history") for pk, _t in rows if pk not in sent
    ]
    return context
