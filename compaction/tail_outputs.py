"""The bounded fresh tail (issue 31): large tool outputs sent as references.

The fresh tail is never compacted, so a few large tool outputs in it can make the context
after a `full` compaction larger than the whole budget of a small model. At assembly (never
in the store) a tool output larger than `LCM_TAIL_TOOL_OUTPUT_MAX_TOKENS` is sent as a
reference in the shape of a large file's (`largefiles.reference`): a header naming the
output's id, its tool and size, then its head and tail and how to read it whole
(`lcm_describe` with the id, which returns the whole stored output).

Which ones (`bound_outputs`): walking the included messages from the newest back, in
blocks of ten by seq, large outputs stay verbatim while everything from them to the end of
the context fits the tail's cap; older ones are sent as references. This is "the oldest
first, until the tail fits its cap", decided from the newer messages only: a later request
adds newer messages and never removes them (compaction removes the oldest, and rewrites
the context's start anyway), so an output once sent as a reference stays one in every later
request, and outputs turn into references a block at a time: a message's bytes change at
most once, and rarely (a cacheable prefix, issue 35). The tool-use/result pairing is
untouched: only a result's content changes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from django.conf import settings

from compaction.planning import Row, fresh_tail_start, stored_tokens
from conversations.models import Message, MessagePart
from core.token_estimate import estimate
from largefiles.reference import format_tool_output_reference

# `out_<message id>_<part ordinal>`: what the reference names and `lcm_describe` reads.
OUTPUT_ID = re.compile(r"^out_(\d+)_(\d+)$")
# The head and tail shown: these many characters, or fewer so that a reference stays
# within about half of LCM_TAIL_TOOL_OUTPUT_MAX_TOKENS.
HEAD_CHARS = 1200
TAIL_CHARS = 800
BLOCK_MESSAGES = 10  # outputs change to references a block of messages (by seq) at a time


def output_id(message_id: int, ordinal: int) -> str:
    return f"out_{message_id}_{ordinal}"


def tail_cap(budget: int) -> int:
    """The tail's own cap: `LCM_TAIL_MAX_TOKENS`, and never more than half the budget the
    context is assembled against (so on a small model the tail leaves room for history)."""
    return max(1, min(settings.LCM_TAIL_MAX_TOKENS, budget // 2))


def reference_text(*, message_id: int, ordinal: int, tool_name: str | None, output: str) -> str:
    """The reference sent instead of `output` (deterministic: same output, same bytes)."""
    shown = min(HEAD_CHARS + TAIL_CHARS, 2 * settings.LCM_TAIL_TOOL_OUTPUT_MAX_TOKENS)
    head_chars = shown * HEAD_CHARS // (HEAD_CHARS + TAIL_CHARS)
    tail_chars = shown - head_chars
    head, tail = output[:head_chars].rstrip(), output[-tail_chars:].lstrip()
    omitted = len(output) - head_chars - tail_chars
    ref = output_id(message_id, ordinal)
    summary = (
        f"Tool output of {estimate(output):,} tokens, sent shortened: nothing was removed "
        f'from the store. Read it whole with lcm_describe {{"id": "{ref}"}}.\n\n'
        f"Head:\n{head}\n\n[… {omitted:,} characters not shown …]\n\nTail:\n{tail}"
    )
    return format_tool_output_reference(
        file_id=ref,
        tool_name=tool_name,
        mime_type="text/plain",
        byte_size=len(output.encode("utf-8")),
        summary=summary,
    )


def _shortened(part: dict) -> str | None:
    """The reference for a part's output when it is large enough to be shortened."""
    output = part.get("tool_output")
    if output is None or part.get("tool_error") is not None:
        return None
    limit = settings.LCM_TAIL_TOOL_OUTPUT_MAX_TOKENS
    if len(output) <= HEAD_CHARS + TAIL_CHARS or estimate(output) <= limit:
        return None
    return reference_text(
        message_id=part["message_id"],
        ordinal=part["ordinal"],
        tool_name=part.get("tool_name"),
        output=output,
    )


def bound_outputs(
    messages: Sequence[tuple[int, int, int]], parts: dict[int, list[dict]], cap: int
) -> int:
    """Replace, in `parts` (message id -> its part rows, as the assembler reads them), the
    tool outputs to send as references; `messages` are the included messages as (id, seq,
    stored tokens), oldest first. Returns the tokens saved. A setting of 0 turns this off.

    Messages go in blocks of `BLOCK_MESSAGES` by seq, newest first: a block that fits the
    cap with what follows it stays verbatim; in the first block that does not fit, the
    newest block, outputs are shortened one at a time, the oldest first; in any older
    block, all of them. So outputs change to references a block at a time (the bytes of a
    request's messages change rarely), and the newest output is sent whole whenever it
    fits."""
    if settings.LCM_TAIL_TOOL_OUTPUT_MAX_TOKENS <= 0:
        return 0
    blocks: list[list[tuple[int, int, int]]] = []
    for message_id, seq, tokens in messages:
        if blocks and blocks[-1][0][1] // BLOCK_MESSAGES == seq // BLOCK_MESSAGES:
            blocks[-1].append((message_id, seq, tokens))
        else:
            blocks.append([(message_id, seq, tokens)])
    suffix = saved = 0
    over = False
    for index in range(len(blocks) - 1, -1, -1):
        block = blocks[index]
        whole = sum(tokens for _, _, tokens in block)
        if not over and suffix + whole <= cap:
            suffix += whole
            continue
        one_by_one = not over and index == len(blocks) - 1
        over = True
        for message_id, _, tokens in reversed(block):
            step, cut = _shorten(parts.get(message_id, ()), tokens, suffix, cap, one_by_one)
            suffix += step
            saved += cut
    return saved


def _shorten(
    parts: Sequence[dict], tokens: int, suffix: int, cap: int, one_by_one: bool
) -> tuple[int, int]:
    """Shorten one message's large outputs: all of them, or (`one_by_one`) the newest
    kept while it fits `cap` with `suffix`. Returns (its tokens as sent, tokens saved)."""
    large = []
    rest = tokens
    for part in parts:
        reference = _shortened(part)
        if reference is not None:
            size = estimate(part["tool_output"])
            large.append((part, reference, size))
            rest -= size
    sent = max(0, rest)
    saved = 0
    for part, reference, size in reversed(large):
        if one_by_one and suffix + sent + size <= cap:
            sent += size
            continue
        part["tool_output"] = reference
        shrunk = estimate(reference)
        sent += shrunk
        saved += max(0, size - shrunk)
    return sent, saved


def candidates(messages: Sequence[tuple[int, int, int]]) -> list[int]:
    """The messages that can hold an output to shorten (stored tokens above the limit)."""
    limit = settings.LCM_TAIL_TOOL_OUTPUT_MAX_TOKENS
    if limit <= 0:
        return []
    return [message_id for message_id, _, tokens in messages if tokens > limit]


class FreshTail:
    """The fresh tail of a context assembled against `budget` (or compacted for it): the
    one rule (`planning.fresh_tail_start`) with the tail's cap and its measure, for the
    compaction engine and the assembler alike."""

    def __init__(self, budget: int):
        self.cap = tail_cap(budget)
        self._known: dict[tuple, int] = {}

    def start(self, rows: Sequence[Row]) -> int:
        return fresh_tail_start(
            rows, settings.LCM_FRESH_TAIL_COUNT, cap=self.cap, measure=self.measure
        )

    def measure(self, rows: Sequence[Row], start: int) -> int:
        """What rows[start:] (the context's newest items) weigh as the tail is sent:
        summaries at their token count, messages at theirs once `bound_outputs` shortened
        their large outputs against the cap; nothing is changed. Exact up to the cap,
        read cheaply: the stored tokens when they fit the cap or nothing is large enough to
        shorten, and what cannot be shortened when that alone is over the cap (a lower
        bound); otherwise the messages' seq and the large ones' tool outputs are read (two
        queries; asking again about the same stretch gets the remembered answer)."""
        stored = stored_tokens(rows, start)
        if stored <= self.cap:
            return stored
        messages = [
            (rows[i].message_id, rows[i].token_count)
            for i in range(start, len(rows))
            if rows[i].is_message
        ]
        ids = candidates([(message_id, 0, tokens) for message_id, tokens in messages])
        if not ids:
            return stored
        large = set(ids)
        floor = stored - sum(tokens for message_id, tokens in messages if message_id in large)
        if floor > self.cap:  # what cannot be shortened is over the cap already
            return floor
        key = (tuple(messages), stored)
        if key not in self._known:
            seqs = dict(
                Message.objects.filter(pk__in=[m for m, _ in messages]).values_list("id", "seq")
            )
            sequenced = [(m, seqs[m], tokens) for m, tokens in messages]
            self._known[key] = stored - bound_outputs(sequenced, _output_parts(ids), self.cap)
        return self._known[key]


def _output_parts(message_ids: Sequence[int]) -> dict[int, list[dict]]:
    """The tool-output parts of these messages, in the shape `bound_outputs` reads."""
    parts: dict[int, list[dict]] = {}
    for part in (
        MessagePart.objects.filter(message_id__in=message_ids, tool_output__isnull=False)
        .order_by("message_id", "ordinal")
        .values("message_id", "ordinal", "tool_name", "tool_output", "tool_error")
    ):
        parts.setdefault(part["message_id"], []).append(part)
    return parts
