"""What a pass would compact: pure functions over the active context's rows.

The engine reads the context once per pass (`context_rows`, one query) and these
functions decide, without touching the database, where the fresh tail starts and which
contiguous range a leaf or condensed pass takes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from conversations.models import ContextItem, ItemType, Role, Summary


@dataclass(frozen=True)
class Row:
    item_id: int
    ordinal: int
    item_type: str
    message_id: int | None
    summary_id: str | None
    token_count: int
    role: str | None  # messages only
    depth: int | None  # summaries only

    @property
    def is_message(self) -> bool:
        return self.item_type == ItemType.MESSAGE


def context_rows(conversation_id: int) -> list[Row]:
    """The active context in order, with what planning needs from each item: one query for
    the items (with their message's role), one for their summaries' depths by primary key
    (a lookup, not a join, so its cost never depends on the size of the summary table)."""
    items = list(
        ContextItem.objects.filter(conversation_id=conversation_id)
        .order_by("ordinal")
        .values_list(
            "id", "ordinal", "item_type", "message_id", "summary_id", "token_count", "message__role"
        )
    )
    summary_ids = [item[4] for item in items if item[4] is not None]
    depths = (
        dict(Summary.objects.filter(pk__in=summary_ids).values_list("id", "depth"))
        if summary_ids
        else {}
    )
    return [Row(*item, depths.get(item[4])) for item in items]


# What a stretch of the context weighs as the tail is sent: `measure(rows, start)` is the
# tokens of rows[start:] once their large tool outputs are shortened
# (`tail_outputs.TailMeasure`; `stored_tokens` where nothing is shortened).
TailMeasure = Callable[[Sequence[Row], int], int]


def stored_tokens(rows: Sequence[Row], start: int) -> int:
    return sum(rows[index].token_count for index in range(start, len(rows)))


def fresh_tail_start(
    rows: Sequence[Row], tail_count: int, *, cap: int, measure: TailMeasure
) -> int:
    """Index of the first protected row: the newest `tail_count` raw messages, reaching
    back to the newest user message while the tail stays within `cap` (as `measure`d:
    a sub-agent transcript's only user message is its first, and reaching back to it would
    protect the whole transcript); otherwise from the newest boundary at or before the
    newest messages that keeps every tool call with its results."""
    start = len(rows)
    seen = 0
    for index in range(len(rows) - 1, -1, -1):
        if seen >= tail_count:
            break
        if rows[index].is_message:
            seen += 1
            start = index
    user = _newest_user(rows)
    if user is not None and user < start and measure(rows, user) <= cap:
        return user
    while 0 < start < len(rows) and _splits_calls(rows, start):
        start -= 1
    return start


def _newest_user(rows: Sequence[Row]) -> int | None:
    for index in range(len(rows) - 1, -1, -1):
        if rows[index].is_message and rows[index].role == Role.USER:
            return index
    return None


def _splits_calls(rows: Sequence[Row], start: int) -> bool:
    """Whether a tail starting at `start` would hold tool results whose call is before it.
    From roles (a result's call is in the assistant messages just before the results): after
    a result, only another result splits; after an assistant message, the assistant messages
    from `start` on being followed by results (so the run's calls may be split)."""
    before = rows[start - 1]
    if not before.is_message or before.role not in (Role.ASSISTANT, Role.TOOL):
        return False
    if before.role == Role.TOOL:
        return rows[start].is_message and rows[start].role == Role.TOOL
    for index in range(start, len(rows)):
        row = rows[index]
        if not row.is_message or row.role != Role.ASSISTANT:
            return row.is_message and row.role == Role.TOOL
    return False


def raw_tokens_outside_tail(rows: Sequence[Row], tail_start: int) -> int:
    return sum(row.token_count for row in rows[:tail_start] if row.is_message)


@dataclass(frozen=True)
class Candidate:
    kind: str  # "leaf" or "condensed"
    depth: int  # depth of the summary to write
    rows: tuple[Row, ...]  # contiguous context rows it replaces, in order
    previous_summary_id: str | None  # the summary just before the range, for continuity

    @property
    def source_tokens(self) -> int:
        return sum(row.token_count for row in self.rows)


def _previous_summary(rows: Sequence[Row], start: int) -> str | None:
    for index in range(start - 1, -1, -1):
        if not rows[index].is_message:
            return rows[index].summary_id
    return None


def leaf_candidate(rows: Sequence[Row], tail_start: int, chunk_tokens: int) -> Candidate | None:
    """The oldest contiguous run of raw messages before the tail, capped at `chunk_tokens`
    (a single message larger than the cap is taken alone)."""
    start = next((i for i in range(tail_start) if rows[i].is_message), None)
    if start is None:
        return None
    taken: list[Row] = []
    tokens = 0
    for row in rows[start:tail_start]:
        if not row.is_message or (taken and tokens + row.token_count > chunk_tokens):
            break
        taken.append(row)
        tokens += row.token_count
    return Candidate("leaf", 0, tuple(taken), _previous_summary(rows, start))


def condensed_candidate(
    rows: Sequence[Row],
    tail_start: int,
    *,
    leaf_fanout: int,
    condensed_fanout: int,
    chunk_tokens: int,
    max_depth: int | None = None,
) -> Candidate | None:
    """At the shallowest depth with a contiguous run of at least the fanout of same-depth
    summaries, the oldest such run (capped at `chunk_tokens`, never under the fanout).
    Depths never mix. `max_depth` bounds the depth of the summary written."""
    runs: list[tuple[int, int, int]] = []  # (depth, start, end) of same-depth summary runs
    index = 0
    while index < tail_start:
        row = rows[index]
        if row.is_message:
            index += 1
            continue
        end = index
        while end + 1 < tail_start and not rows[end + 1].is_message:
            if rows[end + 1].depth != row.depth:
                break
            end += 1
        runs.append((row.depth or 0, index, end + 1))
        index = end + 1
    for depth in sorted({run[0] for run in runs}):
        if max_depth is not None and depth + 1 > max_depth:
            return None
        fanout = leaf_fanout if depth == 0 else condensed_fanout
        for run_depth, start, end in runs:
            if run_depth != depth or end - start < fanout:
                continue
            taken: list[Row] = []
            tokens = 0
            for row in rows[start:end]:
                if len(taken) >= fanout and tokens + row.token_count > chunk_tokens:
                    break
                taken.append(row)
                tokens += row.token_count
            return Candidate("condensed", depth + 1, tuple(taken), _previous_summary(rows, start))
    return None
