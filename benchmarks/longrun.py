"""A long session on one branch, checked as it goes: the 1,000-turn acceptance run (SRD
20/22, issue 9) shared by `lcm_bench` (turns_long_session) and the test suite (a shorter
run). Turns go through the real runner with the offline provider; states are written by
the deterministic librarian, committed in order one turn behind (so every context also
carries a pending turn); a fact is pinned every `pin_every` turns and one unpinned every
`3 * pin_every`.

Checks, after every commit: the head is the branch's highest state and its seq; the states
form a gap-free chain of parents; every pin added and not removed is on the head verbatim.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from django.db.models import Max

from turns import runner, services
from turns.branches import pin_add, pin_remove
from turns.jobs import commit_pending
from turns.models import Branch, Phase, StateCheckpoint, UserTurn


@dataclass
class LongRunReport:
    turns: int = 0
    head_corruptions: int = 0
    pin_losses: int = 0
    max_context_tokens: int = 0
    max_state_tokens: int = 0
    failed_turns: int = 0
    seconds: float = 0.0
    turn_ms: list[float] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _check_head(branch_id: str, expected_pins: dict[str, str], report: LongRunReport) -> None:
    branch = Branch.objects.get(pk=branch_id)
    top = StateCheckpoint.objects.filter(branch_id=branch_id).aggregate(top=Max("state_seq"))["top"]
    head = StateCheckpoint.objects.get(pk=branch.head_state_id)
    if head.state_seq != branch.head_seq or head.state_seq != top or head.branch_id != branch_id:
        report.head_corruptions += 1
        report.problems.append(f"head {head.state_seq}/{branch.head_seq} vs top {top}")
    pins = {p["id"]: p["text"] for p in head.pinned_facts}
    if pins != expected_pins:
        report.pin_losses += len(set(expected_pins.items()) - set(pins.items()))
        report.problems.append(f"pins differ at state {head.state_seq}")
    report.max_state_tokens = max(report.max_state_tokens, head.token_count_est)


def _check_chain(branch_id: str, report: LongRunReport) -> None:
    rows = list(
        StateCheckpoint.objects.filter(branch_id=branch_id)
        .order_by("state_seq")
        .values_list("pk", "state_seq", "parent_id")
    )
    for index, (_pk, seq, parent) in enumerate(rows):
        if seq != index or (index and parent != rows[index - 1][0]):
            report.head_corruptions += 1
            report.problems.append(f"state chain broken at seq {seq}")
            break


def long_session(*, owner, turns: int, pin_every: int = 50) -> LongRunReport:
    report = LongRunReport()
    session = services.session_create(owner=owner, title=f"long session ({turns} turns)")
    branch = Branch.objects.get(pk=session.active_branch_id)
    pins: dict[str, str] = {}
    started = time.perf_counter()
    for n in range(1, turns + 1):
        if n % pin_every == 0:
            _, pin = pin_add(branch=branch, text=f"Pinned fact #{n}: keep `config/p{n}.toml`")
            pins[pin["id"]] = pin["text"]
        if n % (3 * pin_every) == 0 and pins:
            oldest = next(iter(pins))
            pin_remove(branch=branch, pin_id=oldest)
            del pins[oldest]
        text = (
            f"Turn {n}: we decided to keep module src/mod_{n % 37}/part_{n}.py and call "
            f"`handler_{n}()`; the build must stay under {n % 9 + 1} minutes."
        )
        t0 = time.perf_counter()
        turn = services.turn_accept(session=session, branch=branch, content=text)
        turn = runner.run_turn(turn_id=turn.pk)
        report.turn_ms.append((time.perf_counter() - t0) * 1000)
        if turn.phase == Phase.FAILED:
            report.failed_turns += 1
        context = UserTurn.objects.values_list("context", flat=True).get(pk=turn.pk) or {}
        total = sum((context.get("sections_tokens") or {}).values())
        report.max_context_tokens = max(report.max_context_tokens, total)
        # commit one turn behind: the previous turn is pending while this one runs
        previous = UserTurn.objects.filter(branch=branch, turn_seq=turn.turn_seq - 1).first()
        if previous is not None:
            from turns.jobs import summarize_turn

            summarize_turn(turn_id=previous.pk)
            _check_head(branch.pk, pins, report)
        report.turns += 1
    commit_pending(branch=branch)
    _check_head(branch.pk, pins, report)
    _check_chain(branch.pk, report)
    report.seconds = time.perf_counter() - started
    return report
