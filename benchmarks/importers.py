"""Import benchmarks (`lcm_bench --only import`).

* A Claude Code session of about 5,200 records (tool use, two compactions, a branch and
  a sidechain) imported through `lcm_import claude-code`'s service; then the conversation
  is compacted, grepped and expanded like native data.
* A lossless-claw database of 100,000 messages (10 conversations; the schema of 0.15.3,
  built by `benchmarks.synthetic`, not by its program), imported with its summaries,
  lineage and context; rows per second over every table written.
"""

from __future__ import annotations

import json
import tempfile
import uuid
from pathlib import Path

from benchmarks.conversations import bench_user
from benchmarks.harness import BenchContext, BenchRow, Timer, benchmark
from benchmarks.synthetic import build_lossless_claw_db, claude_code_session
from compaction.engine import compact_conversation
from conversations.models import Conversation, Summary
from importers.services import import_file
from retrieval.grep import GrepRequest, grep_for_user
from retrieval.selectors import expand_summary


def _claude_code(ctx: BenchContext, folder: Path) -> list[BenchRow]:
    session = f"bench-cc-{uuid.uuid4().hex[:8]}"
    records = claude_code_session(rounds=ctx.n(1300), session_id=session)
    path = folder / "session.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    user = bench_user()
    with Timer() as t:
        report = import_file(format="claude-code", path=path, owner=user)
    messages = report.totals()["messages"]
    rows = [
        BenchRow(
            "import claude-code transcript",
            t.seconds,
            "s",
            "< 10 s for >= 5,000 records (PostgreSQL)",
            f"{len(records):,} records -> {messages:,} messages, "
            f"{len(records) / t.seconds:,.0f} records/s",
        )
    ]
    conversation = Conversation.objects.get(owner=user, session_id=session)
    with Timer() as t:
        result = compact_conversation(conversation_id=conversation.pk, mode="full")
    summaries = Summary.objects.filter(conversation=conversation).count()
    rows.append(
        BenchRow(
            "compact the imported transcript",
            t.seconds,
            "s",
            "",
            f"{result.status}, {summaries} summaries",
        )
    )
    ticket = f"RND-{min(777, ctx.n(1300) - 1):05d}"
    with Timer() as t:
        hits = grep_for_user(
            user=user,
            request=GrepRequest(query=ticket, mode="regex", conversation_id=conversation.pk),
        )
    covering = next((h["covered_by"] for h in hits if h.get("covered_by")), None)
    detail = f"{len(hits)} hit(s) for {ticket}"
    if covering:
        expanded = expand_summary(
            Summary.objects.get(pk=covering), depth=8, include_messages=True, token_cap=10**6
        )
        detail += f"; covering {covering} expands to {len(expanded.messages)} messages"
    rows.append(
        BenchRow("grep + expand the imported transcript", t.seconds * 1000, "ms", "", detail)
    )
    return rows


def _lossless_claw(ctx: BenchContext, folder: Path) -> list[BenchRow]:
    path = folder / "lcm.db"
    per = ctx.n(10_000)
    with Timer() as built:
        source = build_lossless_claw_db(
            path, conversations=10, messages_per_conversation=per, tag=uuid.uuid4().hex[:8]
        )
    with Timer() as t:
        report = import_file(format="lossless-claw", path=path, owner=bench_user())
    totals = report.totals()
    written = sum(totals.values())
    assert totals["messages"] == source["messages"], (totals, source)
    return [
        BenchRow(
            "import lossless-claw database",
            written / t.seconds,
            "rows/s",
            "",
            f"{source['messages']:,} messages, {written:,} rows in {t.seconds:.1f} s "
            f"({source['messages'] / t.seconds:,.0f} messages/s; source built in "
            f"{built.seconds:.1f} s)",
        )
    ]


@benchmark("import")
def imports(ctx: BenchContext) -> list[BenchRow]:
    with tempfile.TemporaryDirectory(prefix="lcm-bench-import-") as folder:
        return _claude_code(ctx, Path(folder)) + _lossless_claw(ctx, Path(folder))
