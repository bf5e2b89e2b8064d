"""The passage a search row returns (grep's `text` in the semantic and hybrid modes, the
MCP and model tools alike): the matched unit with enough of its neighbours in the same
message to stand alone, at most LCM_SEARCH_PASSAGE_TOKENS (docs/memory.md, "Passages").

A unit is about a sentence of one message (memory.chunker.unit_segments); read alone, "It
fixed the crash." says nothing. The passage grows from the matched unit over the units
just after and before it in its message, after first (a sentence is explained by what
follows more often than by what precedes), while the total stays within the bound. A
passage never leaves its message: the row names that message and the passage's character
offsets in it, so describe and expand still reach the whole.

`passage_span` is a pure function (the evaluation prices its BM25 baseline's rows with it,
docs/benchmarks.md); `passages_for` reads the sibling units of the hits in one query.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from django.conf import settings
from django.db.models import F, Q

from memory.archived_unit_text import hydrate_chunks
from memory.models import Chunk


@dataclass(frozen=True)
class Passage:
    text: str
    tokens: int
    start_offset: int  # character offsets into the message's text
    end_offset: int
    units: int  # how many units it joins


def passage_span(tokens: Sequence[int], at: int, limit: int) -> tuple[int, int]:
    """(first, last): the run of units (one message's, in order, `tokens` each) around
    unit `at` that the passage joins. The matched unit always; then the next unit after,
    then the one before, alternating, each while the total stays within `limit` (a side
    that does not fit stops growing)."""
    first = last = at
    total = tokens[at]
    open_after, open_before = True, True
    while open_after or open_before:
        if open_after:
            if last + 1 < len(tokens) and total + tokens[last + 1] <= limit:
                last += 1
                total += tokens[last]
            else:
                open_after = False
        if open_before:
            if first > 0 and total + tokens[first - 1] <= limit:
                first -= 1
                total += tokens[first]
            else:
                open_before = False
    return first, last


def join_units(units: Sequence) -> str:
    """The units' texts as one: the gap between two units' offsets was a blank line (2+
    characters), a space or newline (1), or nothing."""
    parts = [units[0].rendered_text]
    for before, after in zip(units, units[1:], strict=False):
        gap = after.start_offset - before.end_offset
        parts.append(("\n\n" if gap >= 2 else " " if gap == 1 else "") + after.rendered_text)
    return "".join(parts)


def passages_for(
    chunks: Sequence[Chunk], limit: int | None = None, alone: Collection[str] = ()
) -> dict[str, Passage]:
    """`{chunk id: its passage}` for hit units. Units over several messages (older chunks)
    and messages cut into one unit are their own passage; `alone` names units the caller
    knows to be their message's only one (search's cache does), left out of the query."""
    limit = settings.LCM_SEARCH_PASSAGE_TOKENS if limit is None else limit
    single = [c for c in chunks if c.seq_start == c.seq_end and c.pk not in alone]
    siblings: dict[tuple[int, int], list[Chunk]] = {}
    if single:
        query = Q()
        for conversation_id in {c.conversation_id for c in single}:
            seqs = {c.seq_start for c in single if c.conversation_id == conversation_id}
            query |= Q(conversation_id=conversation_id, seq_start__in=seqs)
        # units of one message end where they start (a window over several is no sibling)
        rows = Chunk.objects.filter(query, seq_end=F("seq_start")).order_by(
            "conversation_id", "seq_start", "start_offset"
        )
        found = hydrate_chunks(rows)
        for unit in found:
            siblings.setdefault((unit.conversation_id, unit.seq_start), []).append(unit)
    out = {}
    for chunk in chunks:
        units = siblings.get((chunk.conversation_id, chunk.seq_start), [])
        at = next((i for i, unit in enumerate(units) if unit.pk == chunk.pk), None)
        if at is None:
            out[chunk.pk] = _alone(chunk)
            continue
        first, last = passage_span([u.token_est for u in units], at, limit)
        run = units[first : last + 1]
        out[chunk.pk] = Passage(
            text=join_units(run),
            tokens=sum(u.token_est for u in run),
            start_offset=run[0].start_offset,
            end_offset=run[-1].end_offset,
            units=len(run),
        )
    return out


def _alone(chunk: Chunk) -> Passage:
    return Passage(
        text=chunk.rendered_text,
        tokens=chunk.token_est,
        start_offset=chunk.start_offset,
        end_offset=chunk.end_offset,
        units=1,
    )
