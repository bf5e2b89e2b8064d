"""The 1,000-turn long session (`manage.py lcm_bench --only turns_long_session`): 1,000
turns on one branch through the runner (offline provider, deterministic librarian, commits
one turn behind, a pin every 50 turns): head corruptions, pinned facts lost, the largest
assembled context, turn time p50/p95. (Fork cost and streaming are in benchmarks/turns.py.)"""

from __future__ import annotations

from django.contrib.auth import get_user_model

from benchmarks.harness import BenchContext, BenchRow, benchmark, p50, percentile


def _owner(name: str):
    user, _ = get_user_model().objects.get_or_create(username=name)
    return user


@benchmark("turns_long_session")
def long_session_bench(ctx: BenchContext) -> list[BenchRow]:
    from benchmarks.longrun import long_session

    turns = ctx.n(1000)
    report = long_session(owner=_owner("bench-turns"), turns=turns, pin_every=50)
    detail = f"{turns} turns, offline provider, deterministic librarian"
    return [
        BenchRow("turns: head corruptions", report.head_corruptions, "count", "0", detail),
        BenchRow("turns: pinned facts lost", report.pin_losses, "count", "0", detail),
        BenchRow("turns: failed turns", report.failed_turns, "count", "0", detail),
        BenchRow(
            "turns: max assembled context", report.max_context_tokens, "tokens", "bounded", detail
        ),
        BenchRow(
            "turns: max state size", report.max_state_tokens, "tokens", "<= target + pins", detail
        ),
        BenchRow("turns: turn time p50 (offline)", p50(report.turn_ms), "ms", "", detail),
        BenchRow(
            "turns: turn time p95 (offline)", percentile(report.turn_ms, 0.95), "ms", "", detail
        ),
    ]
