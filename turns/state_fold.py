"""`context_strategy: state`: which state a request sends, and which turns follow it
verbatim (docs/cost.md, "The `state` strategy").

The librarian commits a new state after every turn. A request that sent the newest state
would share nothing cacheable with the previous one, because the state is rewritten each
time. So the state *sent* advances only at a fold: a request sends the state as of its
fold point (a quoted artifact in a system part of its own, a cache breakpoint at its end),
then every finalized turn after that point verbatim as real messages, then the current
message. The next turn keeps the same fold point (recorded in the context's budget), so
consecutive requests share the state and the growing verbatim turns as a prefix. When the
verbatim turns that are committed exceed the fold budget, the turn folds: it sends the head state (the newest
committed one) and leaves out the turns it covers. Nothing stored changes; the model gets
at least what the head state gives it, with the newest turns verbatim instead of folded.

The fold budget is LCM_STATE_FOLD_TOKENS, or less when the model's window leaves less
(`fold_budget`): the verbatim turns never push a request over the window.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from core.token_estimate import estimate
from turns.models import FINALIZED_PHASES, StateCheckpoint, UserTurn

STATE_WRAPPER_TOKENS = 20  # the artifact's tags and heading around the summary


@dataclass
class StateFold:
    state: StateCheckpoint  # the state sent
    fold_seq: int  # the branch's turns up to this turn_seq are folded into `state`
    verbatim: list[UserTurn]  # finalized turns after fold_seq, oldest first
    folded: bool  # this turn moved the fold point to the head
    budget: int  # the fold budget this turn was measured against

    def record(self) -> dict:
        """What the next turn reads back (`_previous_fold`), kept in the context's budget."""
        return {
            "state_sent_id": self.state.pk,
            "state_fold_seq": self.fold_seq,
            "state_folded": self.folded,
            "state_fold_budget": self.budget,
        }


def fold_budget(room_tokens: int, state: StateCheckpoint) -> int:
    """The verbatim turns' budget: LCM_STATE_FOLD_TOKENS, or what the window leaves for
    them (`room_tokens`: the input room less everything but the state and the turns) once
    the state is sent, when that is smaller."""
    return max(0, min(settings.LCM_STATE_FOLD_TOKENS, _window_room(room_tokens, state)))


def _window_room(room_tokens: int, state: StateCheckpoint) -> int:
    """What the window leaves for the verbatim turns once `state` is sent."""
    return room_tokens - estimate(state.summary) - STATE_WRAPPER_TOKENS


def state_fold(turn: UserTurn, room_tokens: int, turn_tokens, own_tokens=None) -> StateFold:
    """The state `turn` sends and the turns it sends verbatim after it. `turn_tokens`
    measures a list of turns as they are sent (context.py's message accounting);
    `own_tokens` (default: the same) without the retrieved blocks they carry, which is what
    the fold budget measures: a block repeats retrieval, which has its own cap, and counting
    it folded every turn once the blocks alone passed the budget (issue 46, 200k window)."""
    own_tokens = own_tokens or turn_tokens
    earlier = UserTurn.objects.filter(
        branch_id=turn.branch_id, turn_seq__lt=turn.turn_seq, phase__in=FINALIZED_PHASES
    )
    previous = _previous_fold(earlier)
    if previous is not None:
        state, fold_seq = previous
        verbatim = _turns_after(earlier, fold_seq)
        budget = fold_budget(room_tokens, state)
        # Only committed turns count against the fold budget: a fold can leave out only
        # what the head state covers, so pending turns (commits lagging behind) would
        # otherwise fold every turn to a slightly newer state (issue 46). All the turns
        # together must still fit what the window leaves.
        committed = [t for t in verbatim if t.state_after_id is not None]
        if own_tokens(committed) <= budget and turn_tokens(verbatim) <= _window_room(
            room_tokens, state
        ):
            return StateFold(state, fold_seq, verbatim, folded=False, budget=budget)
    head = StateCheckpoint.objects.get(pk=turn.branch.head_state_id)
    newest = (
        earlier.filter(state_after__isnull=False)
        .order_by("-turn_seq")
        .values_list("turn_seq", flat=True)
        .first()
    )
    fold_seq = newest or 0
    verbatim = _turns_after(earlier, fold_seq)
    return StateFold(head, fold_seq, verbatim, folded=True, budget=fold_budget(room_tokens, head))


def _turns_after(earlier, fold_seq: int) -> list[UserTurn]:
    return list(
        earlier.filter(turn_seq__gt=fold_seq).defer("context", "telemetry").order_by("turn_seq")
    )


def _previous_fold(earlier) -> tuple[StateCheckpoint, int] | None:
    """The state and fold point the branch's last finalized turn sent (None: it recorded
    none, e.g. it ran before folds existed, or there is no such turn)."""
    budget = earlier.order_by("-turn_seq").values_list("context__budget", flat=True).first()
    if not isinstance(budget, dict):
        return None
    state_id, fold_seq = budget.get("state_sent_id"), budget.get("state_fold_seq")
    if state_id is None or fold_seq is None:
        return None
    state = StateCheckpoint.objects.filter(pk=state_id).first()
    return (state, int(fold_seq)) if state is not None else None
