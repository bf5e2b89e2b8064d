"""A realistic demo conversation: an agent fixing bugs in a small web service.

Generated, not random: the same episodes every time, so the demo (and its tests) are
reproducible. Each episode is a user request, assistant turns with reasoning, tool calls
(shell, file reads, edits with patches) and tool results, ending in a short report. One
early user turn pastes a whole module inside a <file> block, large enough to be stored
aside as a large file.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.test.utils import override_settings
from django.utils import timezone
from django.utils.crypto import get_random_string

from compaction.engine import compact_conversation
from compaction.summarizers import DeterministicSummarizer
from conversations.inputs import parse_message
from conversations.models import Conversation
from conversations.services import conversation_create, messages_append

DEMO_USERNAME = "demo"
DEMO_SESSION = "demo-coding-session"
DEMO_TITLE = "Demo: an agent fixing a flaky cache and hardening the HTTP client"
DEMO_BUDGET = 24_000
# Small chunks so a few hundred short turns give a DAG worth looking at (several leaves,
# condensed levels above them); automatic compaction is off while the demo loads, so no
# job is left queued for a worker.
DEMO_COMPACTION = {
    "LCM_LEAF_CHUNK_TOKENS": 600,
    "LCM_LEAF_TARGET_TOKENS": 160,
    "LCM_CONDENSED_TARGET_TOKENS": 220,
    "LCM_LEAF_MIN_FANOUT": 4,
    "LCM_CONDENSED_MIN_FANOUT": 3,
    "LCM_AUTOCOMPACT_DISABLED": True,
}


@dataclass(frozen=True)
class Episode:
    ask: str
    file: str
    command: str
    failure: str
    cause: str
    fix: str


EPISODES = [
    Episode(
        "tests/test_cache.py::test_expiry fails on CI about one run in five. Can you find out why?",
        "src/cache/store.py",
        "pytest tests/test_cache.py -k expiry -x -q",
        "FAILED tests/test_cache.py::test_expiry - AssertionError: entry still present after ttl",
        "expiry compares time.time() with a monotonic timestamp written at insert",
        "store entries with time.monotonic() and compare against the same clock",
    ),
    Episode(
        "The HTTP client retries POSTs after a timeout and we got duplicate orders. Please stop that.",
        "src/http/client.py",
        "pytest tests/test_client.py -k retry -q",
        "FAILED tests/test_client.py::test_post_not_retried - assert 2 == 1 (calls to /orders)",
        "the retry decorator wraps every method, including non-idempotent ones",
        "retry only GET, HEAD, PUT and DELETE; POST retries need an idempotency key",
    ),
    Episode(
        "Deploys print 'settings: unknown key CACHE_TTL'. Where does that come from?",
        "src/settings/loader.py",
        "python -m app.settings --check",
        "warning: settings: unknown key CACHE_TTL (did you mean CACHE_TTL_SECONDS?)",
        "the key was renamed in v1.4 but the Helm chart still sets the old name",
        "accept CACHE_TTL as a deprecated alias for one release and log a clear warning",
    ),
    Episode(
        "p95 latency of /search doubled after yesterday's release. Can you profile it?",
        "src/search/query.py",
        "python -m cProfile -s cumtime scripts/bench_search.py | head -25",
        "   1200    3.911    0.003 query.py:88(_highlight)  # 61% of the time",
        "highlighting recompiles the regular expression for every hit",
        "compile the pattern once per query and reuse it for every hit",
    ),
    Episode(
        "The nightly export job ran out of memory. Please make it stream.",
        "src/jobs/export.py",
        "python -m jobs.export --dry-run --limit 200000",
        "MemoryError while building rows list (peak 7.8 GiB)",
        "the job materialises every row in a list before writing the CSV",
        "iterate the queryset with a server-side cursor and write rows as they come",
    ),
    Episode(
        "Users in Tokyo see yesterday's date on the dashboard after 9 am. Bug?",
        "src/dashboard/views.py",
        "pytest tests/test_dashboard.py -k timezone -q",
        "FAILED tests/test_dashboard.py::test_today_in_tokyo - 2026-03-01 != 2026-03-02",
        "the view uses date.today() on a server that runs in UTC",
        "convert now() to the user's time zone before taking the date",
    ),
    Episode(
        "Can you add a health check endpoint that the load balancer can call?",
        "src/app/health.py",
        "curl -s -o /dev/null -w '%{http_code}' localhost:8000/healthz",
        "404",
        "there is no health endpoint yet",
        "add /healthz that checks the database and the cache with a 1 s timeout",
    ),
    Episode(
        "The login rate limiter blocks the whole office because we share one IP.",
        "src/auth/ratelimit.py",
        "pytest tests/test_ratelimit.py -q",
        "FAILED tests/test_ratelimit.py::test_per_account_limit - 429 for a different account",
        "the limiter keys only on the client IP",
        "key on (IP, account) and keep a looser per-IP limit for unknown accounts",
    ),
    Episode(
        "Migrations take 40 minutes on the big table. Anything we can do?",
        "migrations/0042_add_status_index.py",
        "python manage.py sqlmigrate orders 0042",
        'CREATE INDEX "orders_status_idx" ON "orders" ("status");  -- locks writes',
        "the index is built inside the migration's transaction and locks the table",
        "use AddIndexConcurrently in a non-atomic migration",
    ),
    Episode(
        "Write a short doc page about the cache so the next person does not repeat this.",
        "docs/cache.md",
        "mkdocs build --strict",
        "WARNING - Doc file 'cache.md' contains a link to 'ttl.md' which is not found",
        "the page links to a page that was never written",
        "fold the TTL notes into cache.md and fix the link",
    ),
]


def _pasted_module(lines: int = 3200) -> str:
    """A long Python module as a user would paste it, inside a <file> block."""
    body = ['"""The cache store: entries with a time to live, sharded by key hash."""', ""]
    for n in range(lines // 8):
        body += [
            f"def shard_{n}_get(store, key, default=None):",
            f'    """Read `key` from shard {n}; expired entries count as missing."""',
            f"    entry = store.shards[{n}].get(key)",
            "    if entry is None or entry.expires_at <= store.clock():",
            "        return default",
            "    return entry.value",
            "",
            "",
        ]
    text = "\n".join(body)
    return f'<file name="src/cache/store_generated.py" mime="text/x-python">\n{text}\n</file>'


def demo_messages(*, start: dt.datetime) -> list[dict]:
    """Every message of the demo, with timestamps a minute or two apart: three rounds over
    every episode, each a question, its tool calls and results, and a closing answer."""
    messages: list[dict] = []
    clock = [start]

    def add(message: dict, minutes: float = 1.5) -> None:
        clock[0] += dt.timedelta(minutes=minutes)
        messages.append({**message, "created_at": clock[0].isoformat()})

    call = 0
    for round_no in range(3):
        for number, ep in enumerate(EPISODES):
            tag = f"{number + 1}.{round_no + 1}"
            ask = ep.ask if round_no == 0 else f"Follow-up on {ep.file}: {_follow_up(round_no)}"
            add({"role": "user", "content": ask}, minutes=6)
            if round_no == 0 and number == 0:
                add(
                    {
                        "role": "user",
                        "content": "Here is the generated store module for reference:\n"
                        + _pasted_module(),
                    }
                )
            for step, (tool, args, output) in enumerate(_steps(ep, round_no)):
                call += 1
                call_id = f"toolu_{call:05d}"
                add(_tool_call_message(ep, tag, step, tool, args, call_id))
                add(_tool_result_message(tool, output, call_id), minutes=0.5)
            add(_done_message(ep, tag, number, round_no))
    return messages


def _tool_call_message(ep, tag: str, step: int, tool: str, args, call_id: str) -> dict:
    """The assistant's step: its reasoning, what it says, and the tool call."""
    return {
        "role": "assistant",
        "content": f"[{tag}] {_intent(tool, ep)}",
        "parts": [
            {
                "part_type": "reasoning",
                "text_content": f"Step {step + 1}: {_thought(tool, ep)}",
            },
            {"part_type": "text", "text_content": f"[{tag}] {_intent(tool, ep)}"},
            {
                "part_type": "tool",
                "tool_name": tool,
                "tool_call_id": call_id,
                "tool_input": args,
                "tool_status": "completed",
            },
        ],
    }


def _tool_result_message(tool: str, output: str, call_id: str) -> dict:
    return {
        "role": "tool",
        "content": output,
        "parts": [
            {
                "part_type": "tool",
                "tool_name": tool,
                "tool_call_id": call_id,
                "tool_output": output,
                "tool_status": "completed",
            }
        ],
    }


def _done_message(ep, tag: str, number: int, round_no: int) -> dict:
    """The episode's closing answer, with the patch it made."""
    return {
        "role": "assistant",
        "content": f"[{tag}] Done: {ep.fix}. Cause: {ep.cause}.",
        "parts": [
            {"part_type": "text", "text_content": f"[{tag}] Done: {ep.fix}."},
            {
                "part_type": "patch",
                "patch_hash": hashlib.sha1(f"{ep.file}:{round_no}".encode()).hexdigest()[:12],
                "patch_files": [ep.file, f"tests/test_{number}.py"],
            },
        ],
    }


def _follow_up(round_no: int) -> str:
    return (
        "the reviewer asked for a regression test and a changelog entry."
        if round_no == 1
        else "CI on the release branch still shows a warning; please double-check."
    )


def _intent(tool: str, ep: Episode) -> str:
    return {
        "bash": f"Running `{ep.command}` to reproduce.",
        "read_file": f"Reading {ep.file} to see how it works.",
        "edit_file": f"Editing {ep.file}: {ep.fix}.",
    }[tool]


def _thought(tool: str, ep: Episode) -> str:
    return {
        "bash": "reproduce first, then read the code the failure points at",
        "read_file": f"the failure suggests that {ep.cause}",
        "edit_file": "smallest change that fixes the cause; then rerun the failing test",
    }[tool]


def _steps(ep: Episode, round_no: int):
    yield "bash", {"command": ep.command}, ep.failure
    yield (
        "read_file",
        {"path": ep.file},
        f"{ep.file}: 184 lines\n  ...\n  # {ep.cause}\n  ...",
    )
    yield (
        "edit_file",
        {"path": ep.file, "summary": ep.fix},
        f"applied 1 hunk to {ep.file} (+{6 + round_no} -{3 + round_no})",
    )
    yield (
        "bash",
        {"command": ep.command},
        "1 passed in 0.41s" if round_no < 2 else "3 passed, 1 warning in 0.77s",
    )


@dataclass(frozen=True)
class DemoResult:
    created: bool
    username: str
    password: str | None
    conversation: Conversation | None
    message_count: int = 0
    compaction_passes: int = 0


def demo_load(
    *, if_empty: bool = False, on_batch: Callable[[int, int], None] | None = None
) -> DemoResult:
    """Create the demo user and conversation; compact it in several passes as it grows.

    With `if_empty`, nothing happens when any conversation exists already. The demo user
    gets a fresh random password, returned once (it is stored only as a hash). Two loads
    racing (two processes starting on an empty database) create the conversation once:
    the loser of `conversation_create` stops without touching the password.
    `on_batch(done, total)` is called after each batch of messages (for progress).
    """
    if if_empty and Conversation.objects.exists():
        return DemoResult(False, DEMO_USERNAME, None, None)
    user, _ = get_user_model().objects.get_or_create(username=DEMO_USERNAME)
    session = DEMO_SESSION
    if not if_empty and Conversation.objects.filter(owner=user, session_id=session).exists():
        session = f"{DEMO_SESSION}-{timezone.now():%Y%m%d%H%M%S}"
    conversation, created = conversation_create(
        owner=user, session_id=session, title=DEMO_TITLE, token_budget=DEMO_BUDGET
    )
    if not created:
        return DemoResult(False, DEMO_USERNAME, None, None)
    password = get_random_string(16)
    user.set_password(password)
    user.save(update_fields=["password"])
    payloads = demo_messages(start=timezone.now() - dt.timedelta(hours=14))
    with override_settings(**DEMO_COMPACTION):
        passes = _append_and_compact(conversation, payloads, on_batch)
    conversation.refresh_from_db()
    return DemoResult(True, DEMO_USERNAME, password, conversation, len(payloads), passes)


def _append_and_compact(
    conversation: Conversation,
    payloads: list[dict],
    on_batch: Callable[[int, int], None] | None = None,
) -> int:
    summarizer = DeterministicSummarizer()  # no network, no spend, same text every time
    passes = 0
    chunk = 80
    for offset in range(0, len(payloads), chunk):
        batch = [parse_message(p) for p in payloads[offset : offset + chunk]]
        messages_append(conversation_id=conversation.pk, messages=batch)
        is_last = offset + chunk >= len(payloads)
        if offset and not is_last:
            compact_conversation(
                conversation_id=conversation.pk, mode="incremental", summarizer=summarizer
            )
            passes += 1
        if on_batch is not None:
            on_batch(offset + len(batch), len(payloads))
    compact_conversation(conversation_id=conversation.pk, mode="full", summarizer=summarizer)
    return passes + 1
