"""Turn states as receipt items (receipts/items.py): a state's folded summary and its pinned
facts, the strings a turn's system text carries them in."""

from __future__ import annotations

from receipts.items import ItemText
from turns.models import StateCheckpoint


def read_states(ids: list) -> dict:
    found = {}
    for pk, summary, pinned, tokens, seq in StateCheckpoint.objects.filter(pk__in=ids).values_list(
        "id", "summary", "pinned_facts", "token_count_est", "state_seq"
    ):
        texts = [summary, *(p.get("text", "") for p in pinned or [])]
        found[pk] = ItemText(
            texts=texts,
            tokens=tokens,
            redacted=any("[redacted" in t for t in texts),
            about={"state_seq": seq, "pinned": len(pinned or [])},
        )
    return found
