"""Context assembly: the bounded model input for the next call.

System content first; the fresh tail always; then older context items newest first while
they fit the budget (stopping at the first that does not, so the included history is one
contiguous stretch); chronological order restored. Summaries are rendered as XML with
their metadata and marked as untrusted data (`compaction.rendering`).

Reads, each one statement:
1. the active context items (narrow columns, no join: the one mutable table is read once,
   so what is included and what is dropped come from one consistent snapshot);
2. the included messages' role, seq and text by primary key (messages are immutable, so a
   second statement cannot disagree with the first);
3. for the anthropic and openai formats, those messages' parts;
4. for summaries not yet in the process's rendering cache, their rows (by primary key,
   never a join against the whole summary table) and the condensed ones' sources.
A tool output larger than `LCM_TAIL_TOOL_OUTPUT_MAX_TOKENS` is sent as a reference with
its head and tail, the oldest first, so that the tail fits its cap (`compaction.tail_outputs`;
the store is unchanged). `dropped` (every item that did not fit, described) is built when first read: its
messages' seq and role are one more lookup by primary key then.

With `describe_dropped=False` (callers that only send the output to a model), step 1 reads
only the newest items (a first guess from the budget, then the whole context if that was
not enough), so the cost follows what fits the budget, not the history's length.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from django.conf import settings
from django.db import connection

from compaction import rendering, tail_outputs
from compaction.planning import Row
from compaction.tail_outputs import FreshTail
from conversations.models import (
    Conversation,
    ItemType,
    PartType,
    Role,
    Summary,
    SummaryKind,
    SummaryParent,
)
from core.api.errors import InvalidInput
from core.token_estimate import estimate

FORMATS = ("neutral", "anthropic", "openai")

_SUMMARY_FIELDS = (
    "id",
    "kind",
    "depth",
    "level",
    "descendant_count",
    "earliest_at",
    "latest_at",
    "content",
)
# Rendered summary XML, its token count, kind and depth, by (summary id, the creation time
# of the context item that holds it). Summaries are immutable and their context item is
# written in the same transaction as the summary, so an entry never goes stale; the time is
# in the key because a test database that is reset can write a different summary under a
# reused id. The key comes from the items query itself: a warm call needs no summary query.
_XML_CACHE: OrderedDict[tuple[str, str], tuple[str, int, str, int]] = OrderedDict()
_XML_CACHE_SIZE = 50_000
_xml_lock = threading.Lock()

# An item of the active context, as read (tuples: no model or dict per row on the hot path).
_ORDINAL, _TOKENS, _MESSAGE, _SUMMARY, _CREATED = range(5)
# With describe_dropped=False, the first read takes the newest items the budget could hold
# at this many tokens per item (plus the tail); few contexts need the second, full read.
_GUESS_TOKENS_PER_ITEM = 24


def clear_summary_cache() -> None:
    with _xml_lock:
        _XML_CACHE.clear()


def _summary_renderings(items: Sequence[tuple]) -> dict[str, tuple[str, int, str, int]]:
    """(XML, tokens, kind, depth) of every summary among `items`: from the cache, else two
    queries (summary rows by primary key, then the sources of the condensed ones) for the
    missing ones."""
    keys = {i[_SUMMARY]: (i[_SUMMARY], i[_CREATED]) for i in items if i[_SUMMARY] is not None}
    found: dict[str, tuple[str, int, str, int]] = {}
    with _xml_lock:
        for summary_id, key in keys.items():
            hit = _XML_CACHE.get(key)
            if hit is not None:
                _XML_CACHE.move_to_end(key)
                found[summary_id] = hit
    missing = [summary_id for summary_id in keys if summary_id not in found]
    if missing:
        details = {
            s["id"]: s for s in Summary.objects.filter(pk__in=missing).values(*_SUMMARY_FIELDS)
        }
        parents: dict[str, list[str]] = {}
        condensed = [i for i in missing if details[i]["kind"] == SummaryKind.CONDENSED]
        if condensed:
            for summary_id, parent_id in (
                SummaryParent.objects.filter(summary_id__in=condensed)
                .order_by("summary_id", "ordinal")
                .values_list("summary_id", "parent_summary_id")
            ):
                parents.setdefault(summary_id, []).append(parent_id)
        with _xml_lock:
            for summary_id in missing:
                row = details[summary_id]
                text = rendering.summary_xml(row, parents.get(summary_id, ()))
                entry = (text, estimate(text), row["kind"], row["depth"])
                found[summary_id] = _XML_CACHE[keys[summary_id]] = entry
            while len(_XML_CACHE) > _XML_CACHE_SIZE:
                _XML_CACHE.popitem(last=False)
    return found


def _fetch(sql: str, params: Sequence) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _context_items(conversation_id: int, newest: int | None) -> list[tuple]:
    """The active context in order (all of it, or its newest `newest` items), one statement.
    The creation time is read for summaries only: it is part of their cache key."""
    created = "CAST(created_at AS TEXT)" if connection.vendor == "postgresql" else "created_at"
    sql = (
        f"SELECT ordinal, token_count, message_id, summary_id, "
        f"CASE WHEN summary_id IS NULL THEN NULL ELSE {created} END "
        "FROM conversations_contextitem WHERE conversation_id = %s ORDER BY ordinal"
    )
    if newest is None:
        return _fetch(sql, [conversation_id])
    rows = _fetch(sql + " DESC LIMIT %s", [conversation_id, newest])
    rows.reverse()
    return rows


def _id_list(ids: Sequence[int]) -> tuple[str, list]:
    """A membership test against a list of ids passed as ONE parameter (an array on
    PostgreSQL, a JSON array on SQLite): the statement text stays short and constant, so
    it is neither rebuilt per call nor limited by SQLite's number of variables."""
    if connection.vendor == "postgresql":
        return "= ANY(%s)", [list(ids)]
    return "IN (SELECT value FROM json_each(%s))", [json.dumps(list(ids))]


def _message_rows(ids: Sequence[int], *, content: bool) -> dict[int, tuple]:
    """(seq, role[, content]) of messages by primary key."""
    if not ids:
        return {}
    columns = "id, seq, role, content" if content else "id, seq, role"
    low, high = min(ids), max(ids)
    if high - low < 2 * len(ids):
        # Dense ids (the usual case: a conversation's recent messages): one primary-key
        # range read beats as many separate probes; the few others in it are skipped.
        wanted = set(ids)
        rows = _fetch(
            f"SELECT {columns} FROM conversations_message WHERE id BETWEEN %s AND %s",
            [low, high],
        )
        return {row[0]: row[1:] for row in rows if row[0] in wanted}
    test, params = _id_list(ids)
    rows = _fetch(f"SELECT {columns} FROM conversations_message WHERE id {test}", params)
    return {row[0]: row[1:] for row in rows}


_PART_COLUMNS = (
    "message_id",
    "part_type",
    "ordinal",
    "text_content",
    "tool_call_id",
    "tool_name",
    "tool_input",
    "tool_output",
    "tool_error",
    "tool_status",
)
_SKIPPED_PARTS = (PartType.REASONING.value, PartType.COMPACTION.value)


def message_parts(message_ids: Sequence[int]) -> dict[int, list[dict]]:
    test, params = _id_list(message_ids)
    rows = _fetch(
        f"SELECT {', '.join(_PART_COLUMNS)} FROM conversations_messagepart "
        f"WHERE message_id {test} AND part_type NOT IN (%s, %s) ORDER BY message_id, ordinal",
        [*params, *_SKIPPED_PARTS],
    )
    parts: dict[int, list[dict]] = {}
    for row in rows:
        part = dict(zip(_PART_COLUMNS, row, strict=True))
        if isinstance(part["tool_input"], str):  # JSON text (SQLite; jsonb read as text)
            part["tool_input"] = json.loads(part["tool_input"])
        parts.setdefault(part["message_id"], []).append(part)
    return parts


class _TailRows(Sequence):
    """The context as planning's `Row`s, built only where the tail rule looks (the
    newest items); a message's role is read on first need, a stretch at a time."""

    def __init__(self, items: list[tuple], messages: dict[int, tuple]):
        self.items, self.messages = items, messages

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index):  # type: ignore[override]
        item = self.items[index]
        message_id = item[_MESSAGE]
        role = None
        if message_id is not None:
            if message_id not in self.messages:
                stretch = self.items[max(0, index - 511) : index + 1]
                self.messages.update(
                    _message_rows(
                        [i[_MESSAGE] for i in stretch if i[_MESSAGE] is not None], content=True
                    )
                )
            role = self.messages[message_id][1]
        item_type = ItemType.MESSAGE if message_id is not None else ItemType.SUMMARY
        return Row(
            0, item[_ORDINAL], item_type, message_id, item[_SUMMARY], item[_TOKENS], role, None
        )


def _first_fitting(
    cost: Callable[[int], int], start: int, used: int, budget: int
) -> tuple[int, int]:
    """Walk back from `start` while the items fit: (first included index, tokens used)."""
    first = start
    for index in range(start - 1, -1, -1):
        step = cost(index)
        if used + step > budget:
            break
        used += step
        first = index
    return first, used


class AssembledContext:
    """The assembled input: `output` for the model, `items` (included, chronological) and
    `dropped` (did not fit, chronological); the last `tail_items` of `items` are the fresh
    tail. The two descriptions are built on first read, from the rows the assembly read (a
    caller that only sends `output` never pays for them)."""

    def __init__(
        self,
        *,
        output: dict,
        token_estimate: int,
        token_budget: int,
        format: str,
        items: Callable[[], list[dict]],
        dropped: Callable[[], list[dict]] | None,
        tail_items: int = 0,
        message_seqs: dict[int, int] | None = None,
        leaves_out: bool = False,
    ):
        self.output = output
        # The included messages' seqs by message id (what the context holds verbatim), and
        # whether the walk left items out for the budget.
        self.message_seqs = message_seqs or {}
        self.leaves_out = leaves_out
        self.token_estimate = token_estimate
        self.token_budget = token_budget
        self.format = format
        self.tail_items = tail_items
        self._items_loader = items
        self._items: list[dict] | None = None
        self._dropped_loader = dropped
        self._dropped: list[dict] | None = None

    @property
    def items(self) -> list[dict]:
        if self._items is None:
            self._items = self._items_loader()
        return self._items

    @property
    def dropped(self) -> list[dict]:
        if self._dropped is None:
            if self._dropped_loader is None:
                raise RuntimeError("assembled with describe_dropped=False: dropped is not known")
            self._dropped = self._dropped_loader()
        return self._dropped

    def as_dict(self) -> dict:
        data = {
            "format": self.format,
            "token_budget": self.token_budget,
            "token_estimate": self.token_estimate,
            **self.output,
            "items": self.items,
        }
        if self._dropped_loader is not None:
            data["dropped"] = self.dropped
        return data


def _describe_message(item: tuple, message: tuple) -> dict:
    return {
        "type": "message",
        "ordinal": item[_ORDINAL],
        "id": item[_MESSAGE],
        "seq": message[0],
        "role": message[1],
        "tokens": item[_TOKENS],
    }


def _describe_summary(item: tuple, rendered: tuple) -> dict:
    return {
        "type": "summary",
        "ordinal": item[_ORDINAL],
        "id": item[_SUMMARY],
        "kind": rendered[2],
        "depth": rendered[3],
        "tokens": rendered[1],
    }


def _describe_all(items: Sequence[tuple], messages: dict[int, tuple]) -> list[dict]:
    missing = [
        i[_MESSAGE] for i in items if i[_MESSAGE] is not None and i[_MESSAGE] not in messages
    ]
    if missing:
        messages = {**messages, **_message_rows(missing, content=False)}
    summaries = _summary_renderings(items)
    return [
        _describe_message(i, messages[i[_MESSAGE]])
        if i[_MESSAGE] is not None
        else _describe_summary(i, summaries[i[_SUMMARY]])
        for i in items
    ]


class _Costs:
    """Each item's cost in the budget: a message its token count, a summary its rendered
    XML's. Summaries are rendered (or found in the cache) a stretch at a time, newest
    first, so a walk that stops early renders only what it passed."""

    def __init__(self, items: list[tuple]):
        self.items = items
        self.rendered: dict[str, tuple[str, int, str, int]] = {}

    def __call__(self, index: int) -> int:
        item = self.items[index]
        summary_id = item[_SUMMARY]
        if summary_id is None:
            return item[_TOKENS]
        if summary_id not in self.rendered:
            self.rendered.update(_summary_renderings(self.items[max(0, index - 1023) : index + 1]))
        return self.rendered[summary_id][1]


def _decided(items: list[tuple], messages: dict, first: int, tail: int) -> bool:
    """Whether a newest slice of the context gives the same answer as the whole would: the
    walk stopped inside it, and the tail rule found its answer in it (enough messages, and
    a user message in it: the newest one, which the rule looked back to, so what is older
    than the slice cannot change the tail)."""
    if first == 0:
        return False
    count = sum(1 for i in items if i[_MESSAGE] is not None)
    if count < tail:
        return False
    return any(i[_MESSAGE] in messages and messages[i[_MESSAGE]][1] == Role.USER for i in items)


@dataclass
class _Window:
    """What fits the budget: `items[first:]` of `items` (the whole context, or a newest
    slice that decides the same), `used` tokens with the system prompt. `messages` holds
    (seq, role, content) of the messages read so far, by id; `rendered` the renderings of
    the summaries the walk passed, by id; `items[tail_start:]` is the fresh tail."""

    items: list[tuple]
    first: int
    tail_start: int
    used: int
    messages: dict[int, tuple]
    rendered: dict[str, tuple[str, int, str, int]]
    partial: bool = False  # `items` is a newest slice: older items exist before it

    @property
    def leaves_out(self) -> bool:
        """Whether the walk left items out for the budget."""
        return self.first > 0 or self.partial


def assemble_context(
    *,
    conversation: Conversation,
    token_budget: int | None = None,
    system: str | None = None,
    fmt: Literal["neutral", "anthropic", "openai"] = "neutral",
    describe_dropped: bool = True,
    split_summaries: bool = False,
    exclude_message_ids: frozenset[int] = frozenset(),
    tail_budget: int | None = None,
    appended_text: Callable[[list[int]], dict[int, str]] | None = None,
) -> AssembledContext:
    """The bounded context of `conversation` (see the module docstring): choose the window
    that fits the budget, then render it (with `appended_text(ids) -> {id: text}`, a last
    text block per message, uncounted: turns/kept_retrieval.py).

    `split_summaries=True` (the cache-friendly order, docs/cost.md): the leading run of
    summaries is returned apart, as `output["summaries"]` (their XML, oldest first), and
    `output["messages"]` holds only what follows them, so a caller can put the summaries,
    which change only when compaction runs, before the messages, which grow every turn.
    `exclude_message_ids`: messages left out of the output (the turn engine's own current
    message, which it sends itself); they still count against the budget.

    Large tool outputs are sent as references (`compaction.tail_outputs`) within the
    tail's cap, derived from `tail_budget` (default: the budget); a caller whose budget
    varies from request to request passes a steady one, so the same outputs are shortened
    in every request."""
    budget = _checked_budget(conversation, token_budget, fmt)
    tail = tail_outputs.FreshTail(tail_budget or budget)
    window = _choose_window(
        conversation.pk,
        budget=budget,
        system_tokens=estimate(system) if system else 0,
        newest_first=not describe_dropped,
        tail=tail,
    )
    included = window.items[window.first :]
    bounded = _bound_tail(included, window, tail.cap)
    included, tail_items = _excluding(included, window, exclude_message_ids)
    _read_missing_messages(included, window.messages)
    output = _render(
        included,
        window,
        fmt=fmt,
        system=system,
        split_summaries=split_summaries,
        bounded=bounded,
        appended_text=appended_text,
    )
    return AssembledContext(
        output=output,
        token_estimate=window.used - bounded.saved,
        token_budget=budget,
        format=fmt,
        tail_items=tail_items,
        items=lambda: _describe_included(included, window),
        dropped=_dropped_loader(window) if describe_dropped else None,
        message_seqs=_message_seqs(included, window.messages),
        leaves_out=window.leaves_out,
    )


def _excluding(
    included: list[tuple], window: _Window, exclude: frozenset[int]
) -> tuple[list[tuple], int]:
    """The included items without the excluded messages, and how many tail items remain."""
    tail_items = len(window.items) - window.tail_start
    if not exclude:
        return included, tail_items
    tail_items -= sum(i[_MESSAGE] in exclude for i in window.items[window.tail_start :])
    return [i for i in included if i[_MESSAGE] not in exclude], tail_items


def _dropped_loader(window: _Window) -> Callable[[], list[dict]]:
    older = window.items[: window.first]
    return lambda: _describe_all(older, window.messages)


def _message_seqs(included: Sequence[tuple], messages: dict[int, tuple]) -> dict[int, int]:
    return {
        i[_MESSAGE]: messages[i[_MESSAGE]][0]
        for i in included
        if i[_MESSAGE] is not None and i[_MESSAGE] in messages
    }


def render_messages(message_ids: Sequence[int], *, fmt: str = "anthropic") -> list[dict]:
    """Stored messages rendered exactly as `assemble_context` renders them in history (same
    rows, same parts, same renderer): the turn engine sends its current message through
    this, so a message goes out with the same bytes in the turn that sends it first and in
    every later turn that sends it again from history (a cacheable prefix, issue 35)."""
    ids = list(message_ids)
    if not ids:
        return []
    rows = _message_rows(ids, content=True)
    items = [(0, 0, message_id, None, None) for message_id in ids if message_id in rows]
    return rendering.render(
        fmt, _wire_records(items, rows), parts=message_parts(ids), xml={}, system=None
    )["messages"]


def _checked_budget(conversation: Conversation, token_budget: int | None, fmt: str) -> int:
    if fmt not in FORMATS:
        raise InvalidInput(f"format must be one of {', '.join(FORMATS)}", extra={"field": "format"})
    budget = conversation.token_budget if token_budget is None else token_budget
    if budget <= 0:
        raise InvalidInput(
            "token_budget must be a positive integer", extra={"field": "token_budget"}
        )
    return budget


def _choose_window(
    conversation_id: int, *, budget: int, system_tokens: int, newest_first: bool, tail: FreshTail
) -> _Window:
    """The fresh tail (`tail`'s rule, the one compaction plans with) always, then older
    items newest first while they fit `budget`.

    `newest_first`: read only the newest items first (a guess from the budget), and the
    whole context only when that slice was too short to decide what fits."""
    tail_count = settings.LCM_FRESH_TAIL_COUNT
    newest = budget // _GUESS_TOKENS_PER_ITEM + 2 * tail_count + 16 if newest_first else None
    items = _context_items(conversation_id, newest)
    messages: dict[int, tuple] = {}  # message id -> (seq, role, content)
    while True:
        _read_likely_messages(items, messages, tail_count, system_tokens, budget)
        # The real walk: the tail as planning defines it, summaries at their rendered size.
        tail_start = tail.start(_TailRows(items, messages))
        cost = _Costs(items)
        used = system_tokens + sum(cost(i) for i in range(tail_start, len(items)))
        first, used = _first_fitting(cost, tail_start, used, budget)
        complete = newest is None or len(items) < newest
        if complete or _decided(items, messages, first, tail_count):
            return _Window(
                items, first, tail_start, used, messages, cost.rendered, partial=not complete
            )
        newest = None  # the newest slice was too short to decide: read the whole context
        items = _context_items(conversation_id, None)


def _read_likely_messages(
    items: list[tuple], messages: dict[int, tuple], tail_count: int, system_tokens: int, budget: int
) -> None:
    """Read into `messages` the messages a first guess includes, from the stored token
    counts (a summary's rendering only adds to it), so that one lookup usually reads every
    included message: the newest `tail_count` messages, then back while they fit."""
    count = len(items)
    guess, seen = count, 0
    for index in range(count - 1, -1, -1):
        if seen >= tail_count:
            break
        if items[index][_MESSAGE] is not None:
            seen += 1
            guess = index
    used = system_tokens + sum(items[i][_TOKENS] for i in range(guess, count))
    guess, _ = _first_fitting(lambda index: items[index][_TOKENS], guess, used, budget)
    messages.update(
        _message_rows(
            [
                i[_MESSAGE]
                for i in items[guess:]
                if i[_MESSAGE] is not None and i[_MESSAGE] not in messages
            ],
            content=True,
        )
    )


def _read_missing_messages(included: Sequence[tuple], messages: dict[int, tuple]) -> None:
    missing = [
        i[_MESSAGE] for i in included if i[_MESSAGE] is not None and i[_MESSAGE] not in messages
    ]
    if missing:
        messages.update(_message_rows(missing, content=True))


@dataclass
class _Bounded:
    """The included messages' parts read to shorten large tool outputs (the references in
    place), the tokens saved, and the original outputs by their reference."""

    parts: dict[int, list[dict]]
    saved: int
    originals: dict[str, str]


def _bound_tail(included: Sequence[tuple], window: _Window, cap: int) -> _Bounded:
    """Shorten the large tool outputs of the included messages (`tail_outputs`): the parts
    of the messages that can hold one are read here, and the renderer uses them."""
    messages = [(i[_MESSAGE], i[_TOKENS]) for i in included if i[_MESSAGE] is not None]
    ids = tail_outputs.candidates([(m, 0, tokens) for m, tokens in messages])
    if not ids:
        return _Bounded({}, 0, {})
    _read_missing_messages(included, window.messages)
    messages = [(m, window.messages[m][0], tokens) for m, tokens in messages]
    parts = message_parts(ids)
    before = {id(p): p["tool_output"] for rows in parts.values() for p in rows if p["tool_output"]}
    saved = tail_outputs.bound_outputs(messages, parts, cap)
    originals = {
        p["tool_output"]: before[id(p)]
        for rows in parts.values()
        for p in rows
        if id(p) in before and p["tool_output"] != before[id(p)]
    }
    return _Bounded(parts, saved, originals)


def _render(
    included: list[tuple],
    window: _Window,
    *,
    fmt: str,
    system: str | None,
    split_summaries: bool,
    bounded: _Bounded,
    appended_text: Callable[[list[int]], dict[int, str]] | None = None,
) -> dict:
    """The model input in `fmt`; with `split_summaries`, the leading summaries apart."""
    lead = 0
    if split_summaries:
        while lead < len(included) and included[lead][_SUMMARY] is not None:
            lead += 1
    leading, rendered_items = included[:lead], included[lead:]
    xml = {summary_id: entry[0] for summary_id, entry in window.rendered.items()}
    if fmt == "neutral":
        rows = _neutral_rows(rendered_items, window.messages, bounded.originals)
        output = rendering.neutral(rows, xml, system)
    else:
        ids = [i[_MESSAGE] for i in rendered_items if i[_MESSAGE] is not None]
        rest = [i for i in ids if i not in bounded.parts]
        parts = {**(message_parts(rest) if rest else {}), **bounded.parts}
        records = _wire_records(rendered_items, window.messages)
        if appended_text is not None and ids:
            records = _with_appended(records, appended_text(ids))
        output = rendering.render(
            fmt,
            records,
            parts=parts,
            xml=xml,
            system=system,
        )
    if split_summaries:
        output["summaries"] = [xml[i[_SUMMARY]] for i in leading]
    return output


def _neutral_rows(
    items: Sequence[tuple], messages: dict[int, tuple], originals: dict[str, str]
) -> list[tuple]:
    """The neutral format's rows; a message whose text holds a shortened tool output
    carries the reference there instead."""
    rows = []
    for i in items:
        if i[_MESSAGE] is None:
            rows.append((None, i[_SUMMARY], None, None, None))
            continue
        seq, role, content = messages[i[_MESSAGE]]
        for reference, original in originals.items():
            if content and original in content:
                content = content.replace(original, reference)
        rows.append((i[_MESSAGE], None, seq, role, content))
    return rows


def _with_appended(records: list[dict], appended: dict[int, str]) -> list[dict]:
    """Each appended text as a user record of its own right after its message's: the
    renderer merges it into that message as a last text block."""
    if not appended:
        return records
    out = []
    for record in records:
        out.append(record)
        text = appended.get(record["message_id"]) if record["message_id"] is not None else None
        if text:
            out.append(
                {
                    "item_type": ItemType.MESSAGE,
                    "message_id": None,
                    "summary_id": None,
                    "message__seq": record["message__seq"],
                    "message__role": Role.USER,
                    "message__content": text,
                }
            )
    return out


def _wire_records(items: Sequence[tuple], messages: dict[int, tuple]) -> list[dict]:
    """The records `rendering.render` takes for the anthropic and openai formats."""
    return [
        {
            "item_type": ItemType.MESSAGE,
            "message_id": i[_MESSAGE],
            "summary_id": None,
            "message__seq": messages[i[_MESSAGE]][0],
            "message__role": messages[i[_MESSAGE]][1],
            "message__content": messages[i[_MESSAGE]][2],
        }
        if i[_MESSAGE] is not None
        else {"item_type": ItemType.SUMMARY, "summary_id": i[_SUMMARY], "message_id": None}
        for i in items
    ]


def _describe_included(included: Sequence[tuple], window: _Window) -> list[dict]:
    return [
        _describe_message(i, window.messages[i[_MESSAGE]])
        if i[_MESSAGE] is not None
        else _describe_summary(i, window.rendered[i[_SUMMARY]])
        for i in included
    ]
