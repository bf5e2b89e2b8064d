"""Scaling curves (issue 14): ingest, assemble, grep and expand at 1k, 10k, 100k and 1M
messages, plotted to docs/scaling.png (`manage.py lcm_bench --curves`).

Two conversations of the reference workload (`reference_workload`, its settings) grow
side by side through the batch ingest path, and every curve is measured at each size:

- ingest: one batch of 1,000 messages and single-message calls appended to the
  conversation at that size (cost per message);
- assemble: the uncompacted conversation at that size, 128k budget, neutral format, as
  the API does it (every dropped item described) and as a model call needs it
  (`describe_dropped=False`: only what fits is read);
- grep: full text, whole database (every conversation of the bench user), a word held by
  one message, and a 2-character CJK word held by ~0.1% of the messages;
- expand: the other conversation, compacted after each growth step with the instant
  summarizer; depth 3 with messages from the top summary with the default token cap, and
  with no cap from the newest depth-1 summary (a subtree of ~32 leaves, ~8,000 messages,
  whatever the size).

The database is whatever is configured: run it against a scratch database. The 1M step
writes ~2.2M messages (about 10 minutes on PostgreSQL on the benchmark machine).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import connection
from django.test import override_settings

SIZES = (1_000, 10_000, 100_000, 1_000_000)
BATCH = 1_000
CJK_EVERY = 997  # one message in ~1,000 carries the CJK sentence with the needle


@dataclass
class Curve:
    name: str
    unit: str
    points: dict[int, float] = field(default_factory=dict)


def _p50(fn: Callable[[], object], runs: int) -> float:
    fn()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def _messages(count: int, start: int, seed: int):
    """The reference workload, with a CJK sentence in one message of every CJK_EVERY."""
    from benchmarks.reference_workload import reference_payloads
    from conversations.inputs import parse_message

    payloads = reference_payloads(count, seed=seed, start=start)
    for offset, payload in enumerate(payloads):
        if (start + offset) % CJK_EVERY == 0:
            extra = " 我们把缓存过期时间改为九十秒。"
            payload["content"] += extra
            for part in payload.get("parts", []):
                if part.get("text_content"):
                    part["text_content"] += extra
    return [parse_message(p) for p in payloads]


def _grow(conversation, current: int, target: int, seed: int) -> None:
    from conversations.services import messages_append

    while current < target:
        count = min(BATCH, target - current)
        messages_append(conversation_id=conversation.pk, messages=_messages(count, current, seed))
        current += count


def run(sizes=SIZES, out_path: Path | None = None, log=print) -> list[Curve]:
    from benchmarks.conversations import bench_user, new_conversation
    from benchmarks.reference_workload import (
        REFERENCE_BUDGET,
        REFERENCE_SETTINGS,
        InstantSummarizer,
    )
    from compaction.assembly import assemble_context
    from compaction.engine import compact_conversation
    from conversations.models import Summary
    from conversations.services import messages_append
    from retrieval import selectors
    from retrieval.grep import GrepRequest, grep_for_user

    user = bench_user()
    curves = {
        key: Curve(name, unit)
        for key, name, unit in (
            ("ingest_batch", "ingest, batch of 1,000, per message", "ms"),
            ("ingest_one", "ingest, one message per call", "ms"),
            ("assemble_all", "assemble, uncompacted, every dropped item described", "ms"),
            ("assemble_fit", "assemble, uncompacted, what fits only", "ms"),
            ("grep_word", "grep full text, one-message word, whole database", "ms"),
            ("grep_cjk", "grep 2-character CJK word (~0.1% of rows), whole database", "ms"),
            ("expand_capped", "expand depth 3 from the top summary, default cap", "ms"),
            (
                "expand_leaves",
                "expand depth 3, no cap, newest depth-1 summary (~32 leaves, ~8,000 messages)",
                "ms",
            ),
        )
    }
    started = time.perf_counter()
    with override_settings(**REFERENCE_SETTINGS, LCM_AUTOCOMPACT_DISABLED=True):
        raw = new_conversation("curves-raw")
        dag = new_conversation("curves-dag")
        raw_size = dag_size = 0
        for target in sizes:
            # ingest: a batch of 1,000 and 50 single calls appended at this size
            _grow(raw, raw_size, target, seed=11)
            batch = _messages(BATCH, target, seed=11)
            begin = time.perf_counter()
            messages_append(conversation_id=raw.pk, messages=batch)
            curves["ingest_batch"].points[target] = (time.perf_counter() - begin) * 1000 / BATCH
            samples = []
            for message in _messages(50, target + BATCH, seed=11):
                begin = time.perf_counter()
                messages_append(conversation_id=raw.pk, messages=[message])
                samples.append((time.perf_counter() - begin) * 1000)
            curves["ingest_one"].points[target] = statistics.median(samples)
            raw_size = target + BATCH + 50
            _grow(dag, dag_size, target, seed=12)
            dag_size = size = target
            compact_conversation(
                conversation_id=dag.pk, mode="full", summarizer=InstantSummarizer()
            )
            if connection.vendor == "postgresql":
                with connection.cursor() as cursor:  # what autovacuum does in steady state
                    for table in ("message", "contextitem", "summary", "summarymessage"):
                        cursor.execute(f"VACUUM ANALYZE conversations_{table}")
            log(
                f"curves: {size:,} messages per conversation, {time.perf_counter() - started:.0f} s"
            )

            curves["assemble_all"].points[size] = _p50(
                lambda: assemble_context(conversation=raw, token_budget=REFERENCE_BUDGET), 10
            )
            curves["assemble_fit"].points[size] = _p50(
                lambda: assemble_context(
                    conversation=raw, token_budget=REFERENCE_BUDGET, describe_dropped=False
                ),
                10,
            )
            needle = f"#{10_000 + (size // 8)}"  # the ticket of one cycle (a user message)

            def grep(query):
                return lambda: grep_for_user(
                    user=user, request=GrepRequest(query=query, mode="full_text", scope="messages")
                )

            curves["grep_word"].points[size] = _p50(grep(needle), 20)
            curves["grep_cjk"].points[size] = _p50(grep("缓存"), 20)
            summaries = Summary.objects.filter(conversation=dag)
            top = summaries.order_by("-depth", "-created_at").first()
            depth1 = summaries.filter(depth=1).order_by("-created_at").first() or top
            curves["expand_capped"].points[size] = _p50(
                lambda top=top: selectors.expand_for_user(
                    user=user, summary_id=top.id, depth=3, include_messages=True
                ),
                10,
            )
            curves["expand_leaves"].points[size] = _p50(
                lambda depth1=depth1: selectors.expand_for_user(
                    user=user,
                    summary_id=depth1.id,
                    depth=3,
                    include_messages=True,
                    token_cap=100_000_000,
                ),
                10,
            )
    log(f"curves: done in {time.perf_counter() - started:.0f} s")
    result = list(curves.values())
    if out_path is not None:
        plot(result, out_path)
    return result


def table(curves: list[Curve]) -> str:
    sizes = sorted({s for c in curves for s in c.points})
    head = "| curve | " + " | ".join(f"{s:,}" for s in sizes) + " |"
    lines = [head, "|---|" + "---:|" * len(sizes)]
    for c in curves:
        cells = " | ".join(f"{c.points[s]:.3g} {c.unit}" if s in c.points else "" for s in sizes)
        lines.append(f"| {c.name} | {cells} |")
    return "\n".join(lines)


def plot(curves: list[Curve], out_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # no display; nothing downloaded
    import matplotlib.pyplot as plt

    groups = (
        ("Ingest (ms per message)", ("ingest_batch", "ingest_one")),
        ("Assemble, 128k budget (ms)", ("assemble_all", "assemble_fit")),
        ("Grep, whole database (ms)", ("grep_word", "grep_cjk")),
        ("Expand (ms)", ("expand_capped", "expand_leaves")),
    )
    by_key = dict(zip(_KEYS, curves, strict=True))
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    for ax, (title, keys) in zip(axes.flat, groups, strict=True):
        for key in keys:
            curve = by_key[key]
            xs = sorted(curve.points)
            ax.plot(xs, [curve.points[x] for x in xs], marker="o", label=curve.name)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(title)
        ax.set_xlabel("messages")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    vendor = connection.vendor
    fig.suptitle(f"LCM scaling, {vendor}, reference workload (p50)")
    fig.tight_layout()
    out_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_path, dpi=110)
    plt.close(fig)


_KEYS = (
    "ingest_batch",
    "ingest_one",
    "assemble_all",
    "assemble_fit",
    "grep_word",
    "grep_cjk",
    "expand_capped",
    "expand_leaves",
)


def default_path() -> Path:
    return Path(settings.BASE_DIR) / "docs" / "scaling.png"
