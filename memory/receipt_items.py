"""Memory chunks as receipt items (receipts/items.py): a chunk's text as retrieval sends it."""

from __future__ import annotations

from memory.models import Chunk
from receipts.items import ItemText


def read_chunks(ids: list) -> dict:
    return {
        pk: ItemText(
            texts=[text],
            tokens=tokens,
            redacted="[redacted" in text,
            about={"seq_start": start, "seq_end": end, "type": kind},
        )
        for pk, text, tokens, start, end, kind in Chunk.objects.filter(pk__in=ids).values_list(
            "id", "rendered_text", "token_est", "seq_start", "seq_end", "chunk_type"
        )
    }
