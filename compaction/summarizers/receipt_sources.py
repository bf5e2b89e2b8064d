"""What a summarizer call's receipt names (docs/receipts.md): the sources it was asked to
summarize (messages by their ids, summaries by theirs) and the earlier summary it was
given for continuity."""

from __future__ import annotations

from compaction.summarizers.base import SummaryRequest
from conversations.models import Message
from receipts.items import ItemRef


def receipt_sources(request: SummaryRequest) -> dict:
    """Keyword arguments of `receipts.context.call_context` for `request` (the sources are
    named when the receipt is written: naming messages takes a query)."""
    return {
        "site": "summary",
        "conversation_id": request.conversation_id,
        "items": lambda: _sources(request),
        "budget": {"target_tokens": request.target_tokens, "depth": request.depth},
        "notes": {"level": request.level},
    }


def _sources(request: SummaryRequest) -> list[ItemRef]:
    seqs = [int(s.ref.split(":", 1)[1]) for s in request.sources if s.kind == "message"]
    ids = {}
    if seqs and request.conversation_id is not None:
        ids = dict(
            Message.objects.filter(
                conversation_id=request.conversation_id, seq__in=seqs
            ).values_list("seq", "id")
        )
    items = []
    for source in request.sources:
        if source.kind == "summary":
            items.append(ItemRef(kind="summary", id=source.ref, reason="source"))
        else:
            message_id = ids.get(int(source.ref.split(":", 1)[1]))
            if message_id is not None:
                items.append(ItemRef(kind="message", id=message_id, reason="source"))
    return items
