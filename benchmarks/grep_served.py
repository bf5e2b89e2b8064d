"""grep as users run it at scale, with a quarter of the history archived (issue 43, item 9):
the served app (`lcm_serve` with its worker, default settings) answering
`POST /api/v1/grep/` over every conversation of the user, p50 and p95 per mode.

The corpus (built in this process, in bulk): 20 conversations of 1,500 messages at scale 1
(30,000; `--scale 10`: 300,000), short agent turns (benchmarks.conversations), a summary DAG
over the oldest quarter of each (a leaf per 10 messages, a condensed summary per 8 leaves),
that quarter archived by the real retention path in segments of 100 messages (the scheduled
job archives small ranges as they age: 80 segments at 30,000 messages, more than the
64-segment read cache), and one memory unit per message with a random vector (search cost
does not depend on the values; the query is embedded by the real model). Indexing cursors
are set to the end, so the worker has nothing to catch up. The database is analyzed before
the timings (a bulk load leaves the planner's statistics behind; with them stale, a
full-text search on a common word scanned its whole GIN posting list once per
conversation: 2.5 s instead of 0.14 s at 30,000 messages).

Each mode asks the same 12 queries twice (6 from `--scale 5` on, where one scan of the
archive took seconds before issue 43's change; the first pass warms the process's caches,
the second is timed): full text (selective and common words), regex, semantic, hybrid,
and full text and regex with `include_archived`. The corpus's words recur: a common word
is in about nine messages of ten, the worst case for a full-text search sorted by time; a
query stopped by the search timeout (a 422 to the user) is timed as it came and counted.
Writes under a user 'lcm-bench-grep-<messages>' per size: use a scratch database.
"""

from __future__ import annotations

import json
import os
import time

import numpy as np
from django.conf import settings
from django.db import connection

from benchmarks.harness import BenchContext, BenchRow, benchmark, p50, percentile

CONVERSATIONS = 20
SEGMENT_MESSAGES = 100
QUERIES = {
    "full_text": ["#1234", "#777", "deploy", "cache", "#1499 cache", "flaky", "#42", "retry",
                  "#905", "#1100", "timeout", "#315"],
    "regex": [r"#12\d\d\b", r"#7[0-9]7\b", r"dep[a-z]+y", r"cache\s+\w+", r"#14(9|8)9",
              r"fla[k]y", r"#4\d\b", r"re(try|tries)", r"#90[0-9]", r"#11\d0", r"time.?out",
              r"#31[5-9]"],
    "semantic": ["why did the deploy fail", "what was cached", "which tests were flaky",
                 "how did we fix the timeout", "what did we retry", "where is the config",
                 "who changed the schema", "when did the build break", "what was mocked",
                 "which service was slow", "what did the logs say", "how was it rolled back"],
}  # fmt: skip
QUERIES["hybrid"] = QUERIES["semantic"]


def corpus_user(ctx: BenchContext):
    """The corpus's owner, one per size: grep's scope is the user's conversations, so
    corpora of two sizes can share a scratch database."""
    from django.contrib.auth import get_user_model

    name = f"lcm-bench-grep-{CONVERSATIONS * ctx.n(1500)}"
    return get_user_model().objects.get_or_create(username=name)[0]


def _build(ctx: BenchContext) -> tuple[list[int], int]:
    """The corpus (module doc), or the one an earlier run left; returns the conversation
    ids and the segments written."""
    from archive.models import Segment
    from conversations.models import Conversation
    from conversations.services import conversation_create

    user = corpus_user(ctx)
    ids = list(Conversation.objects.filter(owner=user).values_list("pk", flat=True))
    if ids and len(ids) != CONVERSATIONS:
        raise RuntimeError(f"an earlier build of {user} did not finish: use a fresh database")
    if not ids:
        for number in range(CONVERSATIONS):
            conversation = conversation_create(owner=user, session_id=f"grep-{number}")
            ids.append((conversation[0] if isinstance(conversation, tuple) else conversation).pk)
        _fill(ctx, ids)
    return ids, Segment.objects.filter(conversation_id__in=ids).count()


def _fill(ctx: BenchContext, ids: list[int]) -> None:
    """Messages, DAG, memory units and the archived quarter of these conversations."""
    from benchmarks.retention import _append_corpus, _build_dag, _index_memory
    from conversations.models import Conversation
    from memory.models import MessageIndexCursor
    from memory.namespaces import search_namespace
    from retention.models import RetentionPolicy
    from retention.services import retention_apply, retention_plan

    per = ctx.n(1500)
    covered = max(80, (per // 4) // 80 * 80)
    saved = (settings.LCM_MEMORY_INDEX_MESSAGES, settings.LCM_AUTOCOMPACT_DISABLED,
             settings.LCM_ARCHIVE_SEGMENT_MESSAGES)  # fmt: skip
    settings.LCM_MEMORY_INDEX_MESSAGES, settings.LCM_AUTOCOMPACT_DISABLED = False, True
    settings.LCM_ARCHIVE_SEGMENT_MESSAGES = SEGMENT_MESSAGES
    try:
        namespace, rng = search_namespace(), np.random.default_rng(43)
        for pk in ids:
            _append_corpus(pk, "synthetic", per)
            _build_dag(pk, covered)
            _index_memory(pk, namespace, rng)
            RetentionPolicy.objects.create(conversation_id=pk, keep_newest_tokens=1)
        conversations = list(Conversation.objects.filter(pk__in=ids))
        retention_apply(ranges=retention_plan(conversations=conversations))
    finally:
        (settings.LCM_MEMORY_INDEX_MESSAGES, settings.LCM_AUTOCOMPACT_DISABLED,
         settings.LCM_ARCHIVE_SEGMENT_MESSAGES) = saved  # fmt: skip
    MessageIndexCursor.objects.bulk_create(
        [
            MessageIndexCursor(conversation_id=pk, last_seq=last)
            for pk, last in Conversation.objects.filter(pk__in=ids).values_list("pk", "last_seq")
        ],
        update_conflicts=True,
        unique_fields=["conversation"],
        update_fields=["last_seq"],
    )


def _ask(client, mode: str, include_archived: bool, count: int) -> tuple[list[float], int, int]:
    """Timed samples (ms), hits per query in all, and how many stopped at the search
    timeout (LCM_GREP_TIMEOUT_MS: a 422 the user sees, timed as it came)."""
    base = "regex" if mode == "regex" else mode
    samples, hits, timeouts = [], 0, 0
    for timed in (False, True):
        for query in QUERIES[base][:count]:
            body = {"query": query, "mode": mode, "limit": 50,
                    "include_archived": include_archived}  # fmt: skip
            started = time.perf_counter()
            client.http.request("POST", "/api/v1/grep/", json.dumps(body), client.headers)
            response = client.http.getresponse()
            payload = response.read()
            stopped = response.status == 422 and b"search_timeout" in payload
            if response.status != 200 and not stopped:
                raise RuntimeError(f"grep {body}: HTTP {response.status} {payload[:300]!r}")
            if timed:
                samples.append((time.perf_counter() - started) * 1000)
                timeouts += stopped
                hits += 0 if stopped else len(json.loads(payload)["results"])
    return samples, hits, timeouts


@benchmark("grep_served")
def grep_served(ctx: BenchContext) -> list[BenchRow]:
    from benchmarks.indexing_served import _Client, _Served
    from tokens.services import token_rotate

    ids, segments = _build(ctx)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")  # as autovacuum would have by now: a bulk load's stats
    messages = CONVERSATIONS * ctx.n(1500)
    token = token_rotate(user=corpus_user(ctx), name=f"grep-served-{time.time_ns()}").key
    load_before = os.getloadavg()[0]
    server = _Served()
    rows = []
    try:
        client = _Client(server.port, token)
        for mode, archived in (("full_text", False), ("full_text", True), ("regex", False),
                               ("regex", True), ("semantic", False), ("hybrid", False)):  # fmt: skip
            samples, hits, timeouts = _ask(client, mode, archived, 12 if ctx.scale < 5 else 6)
            label = f"{mode}{' + include_archived' if archived else ''}"
            rows.append(
                BenchRow(
                    f"grep_served {messages:,} messages, {segments} segments: {label}, p50",
                    p50(samples),
                    "ms",
                    "",
                    f"p95 {percentile(samples, 0.95):.1f} ms; {len(samples)} queries, "
                    f"{hits / len(samples):.0f} hits each"
                    + (f"; {timeouts} stopped at the search timeout" if timeouts else ""),
                )  # fmt: skip
            )
    finally:
        server.stop()
    ctx.notes.append(f"grep_served: load {load_before:.1f} -> {os.getloadavg()[0]:.1f}")
    return rows
