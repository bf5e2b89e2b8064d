"""The reference implementation's benchmark workload, reproduced exactly (issue 14).

A deterministic 4-message cycle of an agent conversation:

1. a user text;
2. an assistant text with one tool call (`toolu_…` id, small JSON arguments);
3. the tool result: 5-12 lines of code-like output;
4. a final assistant text.

About 270 characters and 80 estimated tokens per message on average (the tool call's
header and arguments count towards its message's tokens), every content unique. With the
settings of `REFERENCE_SETTINGS` and `InstantSummarizer`, this is the workload the
reference figures in `docs/benchmarks.md` ("Reference workload") were measured on.

`reference_payloads(n)` gives the messages as API JSON bodies; `reference_messages(n)`
parses them into the `MessageInput`s that `conversations.services.messages_append` takes.
"""

from __future__ import annotations

import json
import random

from compaction.summarizers.base import SummaryRequest, SummaryResult
from compaction.summarizers.render import render_sources
from conversations.inputs import MessageInput, parse_message

# The reference's settings, as this project's Django settings (override_settings).
REFERENCE_SETTINGS = {
    "LCM_FRESH_TAIL_COUNT": 64,
    "LCM_CONTEXT_THRESHOLD": 0.75,
    "LCM_LEAF_CHUNK_TOKENS": 20_000,
    "LCM_LEAF_TARGET_TOKENS": 2_400,
    "LCM_CONDENSED_TARGET_TOKENS": 2_000,
    "LCM_LEAF_MIN_FANOUT": 8,
    "LCM_CONDENSED_MIN_FANOUT": 4,
    "LCM_DEFAULT_TOKEN_BUDGET": 128_000,
    # The reference's fake summarizer always fits and is never asked again: no fidelity gate.
    "LCM_SUMMARY_MIN_FIDELITY": 0,
    "LCM_SUMMARY_MIN_RELATIONS": 0,
}
REFERENCE_BUDGET = REFERENCE_SETTINGS["LCM_DEFAULT_TOKEN_BUDGET"]
SUMMARY_CHARS = 2_400

_SUBJECTS = (
    "the cache layer", "the retry loop", "the session store", "the billing job",
    "the upload handler", "the search index", "the rate limiter", "the auth middleware",
    "the export worker", "the config loader", "the metrics pipeline", "the queue consumer",
)  # fmt: skip
_PROBLEMS = (
    "returns stale entries after a deploy", "times out under load on CI",
    "drops the last record of every batch", "leaks a file handle per request",
    "logs the token in plain text", "retries forever when the backend is down",
    "double counts events after a restart", "fails on paths with spaces",
)  # fmt: skip
_ASKS = (
    "Can you look at why", "Please find out why", "I need to understand why",
    "Could you check whether", "Help me see why",
)  # fmt: skip
_MODULES = (
    "cache/store", "jobs/retry", "session/backend", "billing/invoice", "upload/views",
    "search/index", "limits/bucket", "auth/middleware", "export/worker", "config/loader",
    "metrics/pipeline", "queue/consumer",
)  # fmt: skip
_FINDINGS = (
    "the key does not include the schema version", "the timeout is read once at import",
    "the loop exits before flushing its buffer", "the handle is opened outside the with block",
    "the formatter prints the whole header dict", "the backoff has no upper bound",
    "the counter is restored from a stale snapshot", "the path is split on whitespace",
)  # fmt: skip
_FILLER = (
    "I would like a small fix with a regression test, and a note in the changelog "
    "explaining what users will notice after the upgrade, because the last release "
    "already changed this behaviour once and people asked about it in the tracker."
)
_CODE = (
    "def {name}(self, key, default=None):",
    "    value = self._backend.get(self._prefix + key)",
    "    if value is None:",
    "        return default",
    "    return self._decode(value, version={n})",
    "class {cls}(BaseStore):",
    "    timeout = settings.CACHE_TIMEOUT  # {n}",
    "    for item in batch[{lo}:{hi}]:",
    "        yield self.transform(item)",
    "    raise TimeoutError('{name} took %.1fs' % elapsed)",
    "import logging, os, time  # line {n}",
    "logger = logging.getLogger(__name__)",
    "        self._buffer.append(record)",
    "    with open(path, 'rb') as fh:",
)


def _sentence(rng: random.Random, words: tuple[str, ...], count: int) -> str:
    return " ".join(rng.choice(words) for _ in range(count))


def _fit(text: str, size: int) -> str:
    """Cut (at a word) or pad with filler to about `size` characters."""
    while len(text) < size:
        text = f"{text} {_FILLER}"
    cut = text.rfind(" ", 0, size)
    return text[: cut if cut > size // 2 else size].rstrip(" ,") + "."


def _cycle(k: int, rng: random.Random) -> list[dict]:
    """The four messages of cycle `k` (unique: each carries k)."""
    subject, problem = rng.choice(_SUBJECTS), rng.choice(_PROBLEMS)
    module, finding = rng.choice(_MODULES), rng.choice(_FINDINGS)
    path = f"src/{module}_{k % 97}.py"
    call_id = f"toolu_{k:08d}{rng.getrandbits(64):016x}"
    user = _fit(
        f"{rng.choice(_ASKS)} {subject} {problem} (ticket #{10_000 + k}). It started after "
        f"change {k * 7 % 1000} and I suspect {path}. {_FILLER}",
        rng.randint(230, 330),
    )
    assistant_call = _fit(
        f"I will read {path} first to see how {subject} handles this case in step {k}; "
        f"the symptom, that it {problem}, usually means the state is shared between calls. "
        f"{_FILLER}",
        rng.randint(180, 260),
    )
    lines = []
    for j in range(rng.randint(5, 12)):
        template = _CODE[(k + j * 3 + rng.randrange(len(_CODE))) % len(_CODE)]
        lines.append(
            template.format(
                name=f"get_{module.split('/')[1]}_{j}",
                cls=f"{module.split('/')[0].title()}Store{k % 13}",
                n=k * 16 + j,
                lo=j,
                hi=j + k % 50,
            )
        )
    output = "\n".join(lines)
    final = _fit(
        f"Found it in {path}: {finding}. In run {k} I changed that, so {subject} no longer "
        f"misbehaves this way, and added a test that fails on the old code. "
        f"{_FILLER}",
        rng.randint(230, 340),
    )
    return [
        {"role": "user", "content": user, "parts": [{"part_type": "text", "text_content": user}]},
        {
            "role": "assistant",
            "content": assistant_call,
            "parts": [
                {"part_type": "text", "text_content": assistant_call},
                {
                    "part_type": "tool",
                    "tool_name": "read_file",
                    "tool_call_id": call_id,
                    "tool_input": {"path": path, "offset": k % 200, "limit": 40 + k % 60},
                    "tool_status": "completed",
                },
            ],
        },
        {
            "role": "tool",
            "content": output,
            "parts": [
                {
                    "part_type": "tool",
                    "tool_name": "read_file",
                    "tool_call_id": call_id,
                    "tool_output": output,
                    "tool_status": "completed",
                }
            ],
        },
        {
            "role": "assistant",
            "content": final,
            "parts": [{"part_type": "text", "text_content": final}],
        },
    ]


def reference_payloads(n: int, seed: int = 0, start: int = 0) -> list[dict]:
    """Messages `start` .. `start + n - 1` of the workload, as API JSON bodies.

    Deterministic in (seed, index): the same index always gives the same message, so
    a run can be continued (`start`) without repeating content.
    """
    out: list[dict] = []
    first_cycle, last_cycle = start // 4, (start + n + 3) // 4
    for k in range(first_cycle, last_cycle):
        rng = random.Random(f"{seed}:{k}")
        for offset, payload in enumerate(_cycle(k, rng)):
            if start <= 4 * k + offset < start + n:
                out.append(payload)
    return out


def reference_messages(n: int, seed: int = 0, start: int = 0) -> list[MessageInput]:
    """The workload's messages in the shape `messages_append` takes."""
    return [parse_message(p) for p in reference_payloads(n, seed=seed, start=start)]


class InstantSummarizer:
    """The reference's fake summarizer: the first 2,400 characters of its input plus one
    "Expand for details about" line. No model, no escalation: it always fits."""

    name = "instant"

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        text = render_sources(request)
        first, last = request.sources[0].ref, request.sources[-1].ref
        content = (
            f"{text[:SUMMARY_CHARS]}\n"
            f"Expand for details about: {len(request.sources)} items, {first} to {last}."
        )
        return SummaryResult(content=content, model="instant")


def workload_shape(n: int = 4_000, seed: int = 0) -> dict:
    """Average characters and estimated tokens per message, and whether all are unique
    (what the issue specifies; printed by the bench and checked by a test)."""
    from conversations.services import message_text_and_tokens

    messages = reference_messages(n, seed=seed)
    sized = [message_text_and_tokens(content=m.content, parts=m.parts) for m in messages]
    return {
        "messages": len(messages),
        "avg_chars": sum(len(m.content) for m in messages) / len(messages),
        "avg_tokens": sum(tokens for _, tokens in sized) / len(messages),
        "unique": len({m.content for m in messages}) == len(messages),
        "roles": [m.role for m in messages[:4]],
        "payload_bytes": sum(len(json.dumps(p)) for p in reference_payloads(n, seed=seed)) / n,
    }
