"""What of a long tool result is embedded (LCM_MEMORY_EMBED_TOOL_RESULT_TOKENS, issue 33).

A coding session's few long tool results (file listings, test logs, whole files) hold
most of its search units, and so most of what indexing it costs. Past the setting's size,
only the units in a tool result's first and last half of that many tokens are embedded;
the units between are stored and searched by their words alone (BM25), with no vector.
docs/memory.md, "Long tool outputs", has the measurements behind the default.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from itertools import groupby

from memory.chunker import ChunkSpec, Segment


def apply(
    units: Sequence[ChunkSpec], segments: Sequence[Segment], *, limit: int
) -> list[ChunkSpec]:
    """`units` (one message's units consecutive, as unit_segments cuts them) with the
    middle units of every tool result longer than `limit` tokens marked not embedded;
    `limit` 0 embeds everything."""
    if limit <= 0:
        return list(units)
    tool_seqs = {s.seq for s in segments if s.is_tool_result}
    out: list[ChunkSpec] = []
    for seq, group in groupby(units, key=lambda unit: unit.seq_start):
        message_units = list(group)
        if seq in tool_seqs and sum(u.token_est for u in message_units) > limit:
            message_units = _head_and_tail(message_units, limit // 2)
        out.extend(message_units)
    return out


def _head_and_tail(units: list[ChunkSpec], window: int) -> list[ChunkSpec]:
    """Units starting within the first `window` tokens or ending within the last `window`
    stay embedded; the others are marked lexical-only."""
    total = sum(u.token_est for u in units)
    marked, before = [], 0
    for unit in units:
        after = total - before - unit.token_est
        keep = before < window or after < window
        marked.append(unit if keep else replace(unit, embedded=False))
        before += unit.token_est
    return marked
