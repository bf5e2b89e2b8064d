"""Prompt caching, shared by every adapter: where the stable prefix ends, which keys and
usage fields each provider uses, and what a cached prefix is billed (docs/cost.md).

- `CachePlan` is what the turn engine knows about a request's stability: the system text
  cut at its stable boundaries and how many leading messages the next request will send
  again unchanged. The Anthropic adapter turns it into at most four `cache_control`
  breakpoints (`anthropic_breakpoints`); the OpenAI adapters (Responses, and Chat
  Completions) send `key` as `prompt_cache_key`, one per branch, so the branch's requests
  land on the same cache.
- `read_cache_usage(provider, usage)` reads the provider's cache usage fields into our
  neutral names: `cache_read_input_tokens` and `cache_creation_input_tokens`.
- `wire_segments` / `shared_prefix_tokens` are the prefix accounting the cost benchmark and
  the tests use: a wire request as a sequence of (prefix hash, tokens) per block, in the
  order the provider reads the prompt (tools, system, messages).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from core.token_estimate import estimate

CACHE_MODES = ("auto", "off")
CACHE_TTLS = ("5m", "1h")
MAX_BREAKPOINTS = 4  # Anthropic refuses more than four cache_control blocks
# How far before a breakpoint Anthropic looks for a prefix an earlier request wrote.
LOOKBACK_BLOCKS = 20
# Anthropic's minimum cacheable prompt length by model family (a shorter prefix is not
# cached, silently); a breakpoint below it would be wasted, so none is placed there.
ANTHROPIC_MIN_TOKENS = (
    ("claude-haiku-4-5", 4096),
    ("claude-opus-4-5", 4096),
    ("claude-3-haiku", 2048),
    ("claude-3-5-haiku", 2048),
)
ANTHROPIC_DEFAULT_MIN_TOKENS = 1024
# OpenAI caches prompts of at least 1,024 tokens, in steps of 128.
OPENAI_MIN_TOKENS = 1024
OPENAI_CACHE_STEP = 128
# Anthropic's price multipliers on the base input price.
READ_MULTIPLIER = 0.1
WRITE_MULTIPLIER = {"5m": 1.25, "1h": 2.0}
# The usage fields each wire API reports cached tokens in.
USAGE_FIELDS = {
    "anthropic": {
        "cache_read_input_tokens": "cache_read_input_tokens",
        "cache_creation_input_tokens": "cache_creation_input_tokens",
    },
    "openai": {"cache_read_input_tokens": "input_tokens_details.cached_tokens"},
    "openai_chat": {"cache_read_input_tokens": "prompt_tokens_details.cached_tokens"},
}


@dataclass(frozen=True)
class CachePlan:
    system_parts: tuple[str, ...]  # the system text cut at stable boundaries
    stable_messages: int  # leading messages the next request sends again unchanged
    key: str | None = None  # prompt_cache_key (OpenAI): one per branch
    # Which system parts end at a stable boundary (a breakpoint candidate); None: all.
    # The others are sent as blocks of their own, unmarked: a later request that adds a
    # part after them still reads the prefix they end (the provider's lookback).
    marked_parts: tuple[int, ...] | None = None


def prompt_cache_key(branch_id: str) -> str:
    return f"lcm-branch-{branch_id}"


def anthropic_min_tokens(model_id: str) -> int:
    for prefix, tokens in ANTHROPIC_MIN_TOKENS:
        if model_id.startswith(prefix):
            return tokens
    return ANTHROPIC_DEFAULT_MIN_TOKENS


def read_cache_usage(provider: str, usage: dict | None) -> dict:
    """{"cache_read_input_tokens", "cache_creation_input_tokens"} from a provider's usage
    object (None where the provider did not say)."""
    usage = usage or {}
    found: dict = {"cache_read_input_tokens": None, "cache_creation_input_tokens": None}
    for ours, path in USAGE_FIELDS.get(provider, {}).items():
        value: object = usage
        for name in path.split("."):
            value = value.get(name) if isinstance(value, dict) else None
        found[ours] = value if isinstance(value, int) else None
    return found


def billed_input(*, uncached: int, read: int, written: int, ttl: str = "5m") -> float:
    """Input tokens at the base price that this request costs."""
    return uncached + READ_MULTIPLIER * read + WRITE_MULTIPLIER[ttl] * written


# Prefix accounting --------------------------------------------------------------------------


def block_tokens(block: dict) -> int:
    """A wire block's tokens in the accounting (its canonical JSON without cache_control)."""
    clean = {k: v for k, v in block.items() if k != "cache_control"}
    return estimate(json.dumps(clean, sort_keys=True, ensure_ascii=False))


def _blocks(content) -> list[dict]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content or [])


def anthropic_wire_blocks(body: dict) -> list[tuple[str, dict]]:
    """A Messages API body's blocks in prompt order, each with where it stands: ("tool",
    tool), ("system", block), ("user"|"assistant", block)."""
    out: list[tuple[str, dict]] = [("tool", t) for t in body.get("tools") or []]
    out.extend(("system", block) for block in _blocks(body.get("system")))
    for message in body.get("messages") or []:
        out.extend((message["role"], block) for block in _blocks(message["content"]))
    return out


def openai_wire_blocks(body: dict) -> list[tuple[str, dict]]:
    """A Responses API body's parts in prompt order (tools, instructions, input items)."""
    out: list[tuple[str, dict]] = [("tool", t) for t in body.get("tools") or []]
    if body.get("instructions"):
        out.append(("system", {"type": "text", "text": body["instructions"]}))
    for item in body.get("input") or []:
        if isinstance(item, dict) and "content" in item and "role" in item:
            out.extend((item["role"], block) for block in _blocks(item["content"]))
        else:
            out.append(("item", item))
    return out


def wire_segments(blocks: list[tuple[str, dict]]) -> list[tuple[str, int]]:
    """(hash of the prefix ending with this block, this block's tokens) for each block."""
    digest = hashlib.sha256()
    segments = []
    for where, block in blocks:
        clean = {k: v for k, v in block.items() if k != "cache_control"}
        digest.update(where.encode() + b"\0")
        digest.update(json.dumps(clean, sort_keys=True, ensure_ascii=False).encode() + b"\0")
        segments.append((digest.copy().hexdigest(), block_tokens(block)))
    return segments


def shared_prefix_tokens(previous: list[tuple[str, int]], current: list[tuple[str, int]]) -> int:
    """Tokens of the longest run of whole blocks `current` starts with that `previous` also
    started with."""
    shared = 0
    for (a, _), (b, tokens) in zip(previous, current, strict=False):
        if a != b:
            break
        shared += tokens
    return shared


def anthropic_breakpoints(
    blocks: list[tuple[str, dict]], *, system_ends: list[int], stable_end: int | None, minimum: int
) -> list[int]:
    """Indexes (into `blocks`) that get `cache_control`: the end of each stable system
    part (and other stable ends in `system_ends`) and of the stable messages, each only
    when the prefix up to it reaches the model's minimum cacheable length; at most four,
    the latest kept. A system part below the minimum gets no mark of its own: it is cached
    as the start of the first marked prefix after it.

    Spare breakpoints go back from the stable end in steps of `LOOKBACK_BLOCKS`: the
    provider looks for an earlier write only that far before a breakpoint, so a turn that
    added more blocks than that (a long tool loop) would otherwise miss the prefix the
    previous turn wrote. A mark inside an already cached stretch costs nothing."""
    cumulative = _cumulative(blocks)
    wanted = sorted({*system_ends, *([stable_end] if stable_end is not None else [])})
    chosen = [i for i in wanted if 0 <= i < len(blocks) and cumulative[i] >= minimum]
    chosen = chosen[-MAX_BREAKPOINTS:]
    if stable_end is not None and stable_end in chosen:
        floor = max((i for i in chosen if i != stable_end), default=-1)
        point = stable_end - LOOKBACK_BLOCKS
        while len(chosen) < MAX_BREAKPOINTS and point > floor and cumulative[point] >= minimum:
            chosen.append(point)
            point -= LOOKBACK_BLOCKS
    return sorted(chosen)


def _cumulative(blocks: list[tuple[str, dict]]) -> list[int]:
    out, running = [], 0
    for _, block in blocks:
        running += block_tokens(block)
        out.append(running)
    return out


@dataclass(frozen=True)
class Analysed:
    """A wire body as the prefix accounting sees it: per block, the prefix hash and the
    cumulative tokens, and which blocks carry `cache_control`."""

    hashes: tuple[str, ...]
    cumulative: tuple[int, ...]
    marks: tuple[int, ...]

    @property
    def total(self) -> int:
        return self.cumulative[-1] if self.cumulative else 0

    def shared_blocks(self, other: Analysed) -> int:
        count = 0
        for a, b in zip(self.hashes, other.hashes, strict=False):
            if a != b:
                break
            count += 1
        return count


def analyse(blocks: list[tuple[str, dict]]) -> Analysed:
    segments = wire_segments(blocks)
    cumulative, running = [], 0
    for _, tokens in segments:
        running += tokens
        cumulative.append(running)
    marks = tuple(i for i, (_, block) in enumerate(blocks) if "cache_control" in block)
    return Analysed(tuple(h for h, _ in segments), tuple(cumulative), marks)


def accounting_between(previous: Analysed | None, current: Analysed, *, minimum: int) -> dict:
    """What Anthropic's cache serves `current` sent right after `previous`: the tokens read
    (the longest prefix of whole blocks both share, up to one of `previous`'s breakpoints
    that reached the minimum), written (from there to `current`'s last breakpoint that
    reaches the minimum) and the rest, uncached; `shared`: the tokens of the whole blocks
    both start with, marked or not."""
    read = shared = 0
    if previous is not None:
        count = previous.shared_blocks(current)
        shared = current.cumulative[count - 1] if count else 0
        for index in previous.marks:
            if index < count and previous.cumulative[index] >= minimum:
                read = max(read, previous.cumulative[index])
    marks = [current.cumulative[i] for i in current.marks if current.cumulative[i] >= minimum]
    written = max(0, max(marks, default=read) - read)
    total = current.total
    return {
        "uncached": total - read - written,
        "read": read,
        "written": written,
        "total": total,
        "shared": shared,
    }


def anthropic_accounting(previous: dict | None, body: dict, *, minimum: int) -> dict:
    """`accounting_between` for two Messages API bodies (`previous` may be None)."""
    before = analyse(anthropic_wire_blocks(previous)) if previous is not None else None
    return accounting_between(before, analyse(anthropic_wire_blocks(body)), minimum=minimum)


def openai_accounting(previous: dict | None, body: dict) -> dict:
    """What OpenAI's automatic cache serves `body` (a Responses API body) sent right after
    `previous` under the same prompt_cache_key: the shared prefix of whole blocks, from
    1,024 tokens, in steps of 128."""
    segments = wire_segments(openai_wire_blocks(body))
    total = sum(tokens for _, tokens in segments)
    shared = 0
    if previous is not None:
        shared = shared_prefix_tokens(wire_segments(openai_wire_blocks(previous)), segments)
    read = (shared // OPENAI_CACHE_STEP) * OPENAI_CACHE_STEP if shared >= OPENAI_MIN_TOKENS else 0
    return {"uncached": total - read, "read": read, "written": 0, "total": total, "shared": shared}
