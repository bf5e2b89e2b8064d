"""A turn's phase transitions: the compare-and-set updates the rest of the engine calls.

Every change of `UserTurn.phase` outside the branch head's commit (TX-B, `branches.py`) is
one of these: `filter(pk=…, phase__in=expected).update(phase=…)`, so a live runner and
the reconciler can race and only one wins. This module sits at the bottom of `turns/`: it
imports only the models and the errors, and everything else imports it.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.utils import timezone

from providers import blocks as B
from turns.errors import PhaseConflict
from turns.models import OPEN_PHASES, Phase, ProviderStep, UserTurn

logger = logging.getLogger("lcm.turns")


def advance(turn: UserTurn, expected: tuple[str, ...], to: str, **fields: Any) -> None:
    """Compare-and-set phase transition; raises PhaseConflict when another process won."""
    now = timezone.now()
    count = UserTurn.objects.filter(pk=turn.pk, phase__in=expected).update(
        phase=to, updated_at=now, **fields
    )
    if count != 1:
        actual = UserTurn.objects.filter(pk=turn.pk).values_list("phase", flat=True).first()
        raise PhaseConflict(turn.pk, "/".join(expected), actual or "missing")
    turn.phase = to
    turn.updated_at = now
    for name, value in fields.items():
        setattr(turn, name, value)


def turn_fail(
    *,
    turn: UserTurn,
    code: str,
    message: str,
    step: ProviderStep | None = None,
    partial_blocks: list[dict] | None = None,
    outcome_status: str = "failed",
) -> UserTurn:
    """Any open phase -> failed. Partial output (if any) is kept on the turn, labelled
    incomplete; the head never advances from it. A turn already finalized is left as it
    is (its answer is durable) and returned unchanged."""
    error = {"code": code, "message": message}
    fields: dict[str, Any] = {"error": error}
    if partial_blocks:
        partial = B.message("assistant", list(partial_blocks))
        partial["incomplete"] = True
        fields["final_assistant_message"] = partial
    with transaction.atomic(durable=True):
        count = UserTurn.objects.filter(pk=turn.pk, phase__in=OPEN_PHASES).update(
            phase=Phase.FAILED, updated_at=timezone.now(), **fields
        )
        if step is not None:
            ProviderStep.objects.filter(pk=step.pk, ended_at__isnull=True).update(
                outcome={
                    "status": outcome_status,
                    "reason": None,
                    "code": code,
                    "message": message,
                },
                ended_at=timezone.now(),
            )
    turn.refresh_from_db()
    if count:
        logger.info("turn %s failed: %s %s", turn.pk, code, message)
    return turn


def index_recorded(*, turn_id: str, status: str) -> None:
    """TX-C's end: the turn's index status, then state_committed -> indexed -> done (each a
    compare-and-set, so a second run or a degraded retry changes nothing else)."""
    now = timezone.now()
    UserTurn.objects.filter(pk=turn_id).update(index_status=status, updated_at=now)
    UserTurn.objects.filter(pk=turn_id, phase=Phase.STATE_COMMITTED).update(
        phase=Phase.INDEXED, updated_at=now
    )
    UserTurn.objects.filter(pk=turn_id, phase=Phase.INDEXED).update(
        phase=Phase.DONE, updated_at=now
    )
