"""Past the budget, what a forwarded request's messages become (issue 41, item 5): the
summaries of the stored conversation's compacted part, then the client's own messages from
a cut on, byte for byte (dropin/wires/anthropic.py `forward_body` sends them).

The provider caches a request's prefix (docs/cost.md): what it read last time is read again
only while the bytes before it stay the same. So the replaced context is rewritten only at
a compaction boundary, and rarely:

- **The cut is kept** (`dropin_thread.forward_cut`: the chain hash of the first kept
  message and the summaries' texts) while the request still fits the budget with it: from
  one request to the next the upstream's messages only grow at their end, and nothing sent
  is rewritten later (no moving head, no summary or reference swapped in afterwards).
- **A new cut goes down to a low-water mark** (`LOW_WATER` of the room the system prompt
  and the tools leave in the budget: Claude Code's own prefix is ~21k tokens), so the requests
  after it append to the same prefix for many turns before the next cut (hysteresis).
  Where the cut falls is bounded by the server's own estimate of what is sent (the
  assembler's window only proposes it), so a new cut is never over the budget it was made
  for, and never has to be re-made on the very next request.
- **The summaries are their own blocks** in one user message before the kept messages,
  the last one marked with `cache_control` (when the request leaves a breakpoint free):
  the prefix up to the summaries is a breakpoint of its own, so at the next cut the
  summaries that stayed the same are read from the cache.

The first kept message is a user message whose tool results all answer calls that are
sent too (the API refuses a result without its call); the current tool loop's assistant
turn, with its thinking blocks, is the client's own and always sent unchanged."""

from __future__ import annotations

from compaction.assembly import assemble_context
from conversations.models import Conversation, Message
from core.token_estimate import estimate
from dropin.models import Thread
from dropin.requests import DropinRequest
from dropin.services import (
    EXTERNAL_PREFIX,
    Plan,
    Replaced,
    input_budget,
    request_tokens,
    request_total,
    thread_plan,
)
from importers import join
from providers.config import ModelSpec

# A new cut fills this share of the room the system prompt and the tools leave in the
# budget: the requests after it grow the same prefix (cache-readable) until the budget is
# full again. Lower: fewer cuts (each one costs the messages' cache) but less verbatim
# history on average ((1 + LOW_WATER) / 2 of the room).
LOW_WATER = 0.5


def forwarded_context(
    *, thread: Thread, request: DropinRequest, plan: Plan, budget: int, force: bool = False
) -> Replaced | None:
    """None while the client's request fits `budget` (and not `force`). Past it: the
    thread's kept cut while the request fits with it; else a new cut (a compaction
    boundary) at `LOW_WATER` of the room, or where the conversation's summaries end when
    that sends less, kept for the requests after it."""
    if not force and request_total(request) <= budget:
        return None
    kept = None if force else _kept_cut(thread, request, plan, budget)
    if kept is not None:
        return kept
    return _new_cut(thread, request, plan, budget)


def _new_cut(thread: Thread, request: DropinRequest, plan: Plan, budget: int) -> Replaced:
    """The summaries the conversation's context begins with (at most half the room), then
    the newest of the client's messages that fit, with them, `LOW_WATER` of the room the
    system prompt and the tools leave in the budget."""
    fixed = request_tokens(request.system, [], request.tools)
    target = fixed + int(max(0, budget - fixed) * LOW_WATER)
    # The whole budget: the assembler's window keeps the newest items first, so a small one
    # would hold messages only; the summaries are what stands for the messages cut.
    assembled = assemble_context(
        conversation=Conversation(pk=thread.conversation_id),
        token_budget=max(1, budget - fixed),
        fmt="anthropic",
        describe_dropped=False,
        split_summaries=True,
    )
    summaries = _newest_fitting(tuple(assembled.output["summaries"]), (target - fixed) // 2)
    proposed = _verbatim_start(request, plan, assembled.items)
    first = first_startable(
        request.messages, max(proposed, fitting_start(request, summaries, target))
    )
    Thread.objects.filter(pk=thread.pk).update(
        forward_cut={"first": plan.hashes[first + 1], "summaries": list(summaries)}
    )
    return replaced_from(request, summaries, first)


def _newest_fitting(summaries: tuple, room: int) -> tuple:
    kept: list[str] = []
    for summary in reversed(summaries):
        if summaries_tokens((*kept, summary)) > room:
            break
        kept.insert(0, summary)
    return tuple(kept)


def summaries_tokens(summaries: tuple) -> int:
    return estimate("\n".join(summaries)) if summaries else 0


def replaced_from(request: DropinRequest, summaries: tuple, first: int) -> Replaced:
    kept = request.messages[first:]
    tokens = request_tokens(request.system, kept, request.tools) + summaries_tokens(summaries)
    return Replaced(summaries, kept[0].get("at", first) if kept else 0, tokens)


def fitting_start(request: DropinRequest, summaries: tuple, target: int) -> int:
    """The earliest index from which the request's messages, with the summaries, the
    system prompt and the tools, fit `target` by the server's estimate (the last message
    when none does). A binary search: the tokens of a suffix only shrink as it starts
    later."""
    fixed = summaries_tokens(summaries)
    messages = request.messages
    low, high = 0, max(0, len(messages) - 1)
    while low < high:
        middle = (low + high) // 2
        if request_tokens(request.system, messages[middle:], request.tools) + fixed <= target:
            high = middle
        else:
            low = middle + 1
    return low


def _kept_cut(thread: Thread, request: DropinRequest, plan: Plan, budget: int):
    cut = Thread.objects.filter(pk=thread.pk).values_list("forward_cut", flat=True).first()
    if not cut or cut.get("first") not in plan.hashes:
        return None
    first = plan.hashes.index(cut["first"]) - 1
    replaced = replaced_from(request, tuple(cut.get("summaries") or ()), first)
    return replaced if replaced.tokens <= budget else None


def _verbatim_start(request: DropinRequest, plan: Plan, items: list) -> int:
    """The index (in the request's messages) of the first message of the trailing run of
    verbatim messages the assembler kept (the last message when it kept none)."""
    run = []
    for item in reversed(items):
        if item["type"] != "message":
            break
        run.append(item["id"])
    position = len(request.messages) - 1
    if run:
        external = (
            Message.objects.filter(pk=run[-1]).values_list("external_id", flat=True).first() or ""
        )
        # A captured message joined with the thread's (importers/join.py) names its hash.
        for held in [external, *join.source_ids_of(run[-1], EXTERNAL_PREFIX)]:
            chain_hash = held.removeprefix(EXTERNAL_PREFIX)
            if chain_hash in plan.hashes:
                position = plan.hashes.index(chain_hash) - 1
                break
    return max(0, position)


def first_startable(messages: list[dict], position: int) -> int:
    """The first user message at or after `position` from which every tool result answers
    a call sent too (the API refuses a result whose call is not sent); the last message
    when none is. One backward pass: `open_results` holds the results whose calls come
    earlier than the message looked at."""
    startable = [False] * len(messages)
    open_results: set[str] = set()
    for index in range(len(messages) - 1, -1, -1):
        for block in messages[index]["blocks"]:
            if block.get("type") == "tool_result":
                open_results.add(block["tool_use_id"])
        for block in messages[index]["blocks"]:
            if block.get("type") == "tool_use":
                open_results.discard(block["id"])
        startable[index] = not open_results and messages[index]["role"] == "user"
    for index in range(position, len(messages)):
        if startable[index]:
            return index
    return len(messages) - 1


def counted_context(*, user, request: DropinRequest, spec: ModelSpec) -> Replaced | None:
    """For `count_tokens` (reads only): the replaced messages the request would be sent
    with, when it is past the budget and continues a stored thread."""
    budget = input_budget(spec, request)
    if request_total(request) <= budget:
        return None
    plan = thread_plan(user=user, request=request, key=None)
    if plan.thread is None or plan.forks:
        return None
    return forwarded_context(thread=plan.thread, request=request, plan=plan, budget=budget)
