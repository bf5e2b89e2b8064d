"""Committing a turn's state: the librarian writes the next state, then TX-B commits it
(`summarize_turn`), for the queued job (turns/jobs.py), for "commit pending now", and for
the `state` strategy's assembly when commits lag too far behind (turns/context.py, issue
46: it commits the pending turns inline with the deterministic librarian, so the fold can
leave them out). Idempotent by construction: a state commit is unique per (branch,
state_seq) and guarded by compare-and-set on the turn's phase and the branch head.
"""

from __future__ import annotations

import time

from django.db import transaction

from turns import metrics
from turns.branches import state_commit
from turns.librarian import librarian_for_turn
from turns.models import FINALIZED_PHASES, Branch, StateCheckpoint, UserTurn


def telemetry_add(turn_id: str, **values) -> None:
    """Merge values into turn.telemetry (read-modify-write under the row lock)."""
    with transaction.atomic():
        turn = UserTurn.objects.select_for_update().only("telemetry").get(pk=turn_id)
        telemetry = dict(turn.telemetry or {})
        latency = telemetry.setdefault("latency_ms", {})
        for key, value in values.items():
            if key.endswith("_ms"):
                latency[key] = value
            else:
                telemetry[key] = value
        UserTurn.objects.filter(pk=turn_id).update(telemetry=telemetry)


def summarize_turn(*, turn_id: str, deterministic: bool = False) -> StateCheckpoint | None:
    """The librarian writes the state after `turn`, then TX-B commits it. Returns the new
    state, or None when there is nothing to do (already committed, failed) or the turn
    must wait for an earlier pending turn. Safe to run twice at once: one commit wins.
    `deterministic`: the deterministic librarian writes it (no model call)."""
    for _attempt in range(3):  # re-plan when a pin or an earlier commit moved the head
        turn = UserTurn.objects.select_related("branch").get(pk=turn_id)
        if turn.state_after_id is not None or turn.phase not in FINALIZED_PHASES:
            return None
        if UserTurn.objects.filter(
            branch_id=turn.branch_id,
            turn_seq__lt=turn.turn_seq,
            phase__in=FINALIZED_PHASES,
            state_after__isnull=True,
        ).exists():
            return None  # strict branch order: the earlier turn commits first
        head = StateCheckpoint.objects.get(pk=turn.branch.head_state_id)
        started = time.monotonic()
        result = librarian_for_turn(turn=turn, head=head, deterministic=deterministic)
        state = state_commit(
            turn=turn, summary=result.summary, librarian=result.info, base_summary=head.summary
        )
        if state is not None:
            summarize_ms = round((time.monotonic() - started) * 1000)
            metrics.observe_latency("summarize", summarize_ms)
            telemetry_add(turn.pk, summarize_ms=summarize_ms, librarian=result.info)
            return state
    return None


def commit_pending(
    *, branch: Branch, deterministic: bool = False, before_seq: int | None = None
) -> list[StateCheckpoint]:
    """ "Commit pending now": run the branch's pending summarizations here, in turn order
    (those before turn `before_seq` only, when given)."""
    states = []
    pending = UserTurn.objects.filter(
        branch_id=branch.pk, phase__in=FINALIZED_PHASES, state_after__isnull=True
    )
    if before_seq is not None:
        pending = pending.filter(turn_seq__lt=before_seq)
    for turn in pending.order_by("turn_seq"):
        state = summarize_turn(turn_id=turn.pk, deterministic=deterministic)
        if state is not None:
            states.append(state)
    return states
