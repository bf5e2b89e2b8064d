"""A retrieved item: one memory unit as search and a turn's memory hand it on, with its
text, scores, rank, how it was packed and where it came from (its provenance).

Search (memory.recall.items_from_units) and a turn's retrieval (memory.turn_retrieval)
both build them, so the type sits below both.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from memory.models import Chunk


@dataclass
class RetrievedItem:
    chunk_id: str
    text: str
    summary: str
    chunk_type: str
    provenance: dict
    similarity: float
    score: float
    rank: int
    tokens: int
    packed_as: str = "full"  # full | summary | slice | attached
    matched_by: str = "vector"  # vector | full_text | both | attached
    slice_offsets: tuple[int, int] | None = None

    def as_dict(self) -> dict:
        data = asdict(self)
        data["slice_offsets"] = list(self.slice_offsets) if self.slice_offsets else None
        data["id"] = self.chunk_id  # the turn engine's context items are keyed by "id"
        return data

    # Read as a mapping too (`dict(item)`, `item.get("id")`), which is how the turn
    # engine's context assembly consumes retrieved items.
    def keys(self):
        return self.as_dict().keys()

    def __getitem__(self, key: str):
        return self.as_dict()[key]

    def get(self, key: str, default=None):
        return self.as_dict().get(key, default)


def provenance(chunk: Chunk) -> dict:
    return {
        "conversation_id": chunk.conversation_id,
        "session_id": chunk.session_id,
        "branch_id": chunk.branch_id,
        "source_turn_id": chunk.source_turn_id,
        "seq_start": chunk.seq_start,
        "seq_end": chunk.seq_end,
        "start_offset": chunk.start_offset,
        "end_offset": chunk.end_offset,
        "created_at": chunk.source_created_at.isoformat(),
    }


def item_for_chunk(
    chunk: Chunk,
    *,
    rank: int,
    similarity: float,
    score: float,
    matched_by: str,
    packed_as: str = "full",
) -> RetrievedItem:
    """The chunk as an item with its full text (packing may cut it later)."""
    return RetrievedItem(
        chunk_id=chunk.pk,
        text=chunk.rendered_text,
        summary=chunk.summary,
        chunk_type=chunk.chunk_type,
        provenance=provenance(chunk),
        similarity=similarity,
        score=score,
        rank=rank,
        tokens=chunk.token_est,
        packed_as=packed_as,
        matched_by=matched_by,
    )
