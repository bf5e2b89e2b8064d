"""The providers' prompt caches as the fake servers keep them: usage computed from the
prefixes the fake actually received, with the providers' rules.

Anthropic (documented behaviour of the Messages API):
- the prompt is read in order tools, system, messages; `cache_control` marks a breakpoint
  on a block; more than four is a 400 `invalid_request_error`;
- at each breakpoint the cache is looked up at that block and up to 19 blocks before it;
  the longest cached prefix found is read (`cache_read_input_tokens`);
- the prefix up to each breakpoint is written if it reaches the model's minimum cacheable
  length (shorter: not cached, silently); the tokens from the read point to the last such
  breakpoint are `cache_creation_input_tokens`; `input_tokens` is the rest;
- an entry lives for its TTL ("5m" default, or "1h"), refreshed when read.

OpenAI (Responses, automatic caching): a request's prefix is cached per
`prompt_cache_key`; `cached_tokens` is the longest whole-block prefix shared with an
earlier request under the same key, counted only from 1,024 tokens and in steps of 128;
`input_tokens` includes the cached ones.

Blocks are counted with `providers.caching.block_tokens` (the tokenizer estimate the
server uses everywhere), so a test can compare the fake's report with the product's own
prefix accounting; the cache semantics here are written independently of it.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time

from providers.caching import block_tokens

ANTHROPIC_LOOKBACK = 20
ANTHROPIC_MAX_BREAKPOINTS = 4
ANTHROPIC_TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}


def anthropic_minimum(model: str) -> int:
    if model.startswith(("claude-haiku-4-5", "claude-opus-4-5")):
        return 4096
    if "haiku" in model and model.startswith("claude-3"):
        return 2048
    return 1024


def _content(content) -> list[dict]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def _prefix_hashes(blocks: list[tuple[str, dict]]) -> list[str]:
    running = hashlib.sha1()
    out = []
    for where, block in blocks:
        clean = {k: v for k, v in block.items() if k != "cache_control"}
        running.update(f"{where}|{json.dumps(clean, sort_keys=True)}\n".encode())
        out.append(running.hexdigest())
    return out


class AnthropicPromptCache:
    def __init__(self, clock=time.monotonic) -> None:
        self.clock = clock
        self.entries: dict[str, tuple[float, float]] = {}  # hash -> (expires, ttl)
        self.lock = threading.Lock()

    def refuse(self, body: dict) -> str | None:
        """The 400 the API answers to badly placed cache_control, or None."""
        marked = [b for _, b in self._blocks(body) if "cache_control" in b]
        if len(marked) > ANTHROPIC_MAX_BREAKPOINTS:
            return (
                f"A maximum of {ANTHROPIC_MAX_BREAKPOINTS} blocks with cache_control may be "
                f"provided. Found {len(marked)}."
            )
        for block in marked:
            control = block["cache_control"]
            if control.get("type") != "ephemeral" or control.get("ttl", "5m") not in (
                ANTHROPIC_TTL_SECONDS
            ):
                return f"cache_control: invalid value {control!r}"
        return None

    @staticmethod
    def _blocks(body: dict) -> list[tuple[str, dict]]:
        blocks = [("tool", t) for t in body.get("tools") or []]
        system = body.get("system")
        if system:
            blocks.extend(("system", b) for b in _content(system))
        for message in body.get("messages") or []:
            blocks.extend((message["role"], b) for b in _content(message["content"]))
        return blocks

    def usage(self, body: dict) -> dict:
        blocks = self._blocks(body)
        hashes = _prefix_hashes(blocks)
        cumulative, running = [], 0
        for _, block in blocks:
            running += block_tokens(block)
            cumulative.append(running)
        total = running
        breakpoints = [i for i, (_, b) in enumerate(blocks) if "cache_control" in b]
        minimum = anthropic_minimum(str(body.get("model", "")))
        now = self.clock()
        with self.lock:
            read = 0
            for bp in breakpoints:
                for position in range(bp, max(-1, bp - ANTHROPIC_LOOKBACK), -1):
                    entry = self.entries.get(hashes[position])
                    if entry is not None and entry[0] > now:
                        read = max(read, cumulative[position])
                        self.entries[hashes[position]] = (now + entry[1], entry[1])
                        break
            written_to = read
            for bp in breakpoints:
                if cumulative[bp] < minimum:
                    continue
                ttl = ANTHROPIC_TTL_SECONDS[blocks[bp][1]["cache_control"].get("ttl", "5m")]
                self.entries[hashes[bp]] = (now + ttl, ttl)
                written_to = max(written_to, cumulative[bp])
        creation = written_to - read
        return {
            "input_tokens": total - read - creation,
            "cache_creation_input_tokens": creation,
            "cache_read_input_tokens": read,
        }


class OpenAIPromptCache:
    MINIMUM = 1024
    STEP = 128

    def __init__(self) -> None:
        self.seen: dict[str, set[str]] = {}
        self.lock = threading.Lock()

    @staticmethod
    def _blocks(body: dict) -> list[tuple[str, dict]]:
        blocks = [("tool", t) for t in body.get("tools") or []]
        if body.get("instructions"):
            blocks.append(("system", {"type": "text", "text": body["instructions"]}))
        for item in body.get("input") or []:
            if isinstance(item, dict) and "role" in item and "content" in item:
                blocks.extend((item["role"], b) for b in _content(item["content"]))
            else:
                blocks.append(("item", item))
        return blocks

    def usage(self, body: dict) -> dict:
        blocks = self._blocks(body)
        hashes = _prefix_hashes(blocks)
        cumulative, running = [], 0
        for _, block in blocks:
            running += block_tokens(block)
            cumulative.append(running)
        key = str(body.get("prompt_cache_key") or "")
        with self.lock:
            bucket = self.seen.setdefault(key, set())
            shared = 0
            for position in range(len(blocks) - 1, -1, -1):
                if hashes[position] in bucket:
                    shared = cumulative[position]
                    break
            bucket.update(hashes)
        cached = (shared // self.STEP) * self.STEP if shared >= self.MINIMUM else 0
        return {"input_tokens": running, "cached_tokens": cached}
