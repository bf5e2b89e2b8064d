"""Branch-level writes: a new branch with its conversation, the state commit (TX-B), pinned
facts, fork, rollback and activation.

The branch head only moves here, always in one transaction that inserts the new state
(seq = head_seq + 1) and advances the head with compare-and-set on `head_seq`; the unique
(branch, state_seq) makes a second commit of the same step impossible.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from conversations.models import Message
from conversations.services import conversation_create
from core.api.errors import InvalidInput, NotFound
from core.ids import new_id
from core.token_estimate import estimate
from turns.errors import TurnNotCommitted
from turns.job_queue import job_dispatch_waiting, job_enqueue
from turns.mirror import mirror_turn
from turns.models import (
    FINALIZED_PHASES,
    Branch,
    Phase,
    ProviderStep,
    Session,
    StateCheckpoint,
    StateReason,
    UserTurn,
)

MAX_PIN_CHARS = 2000


class _Lost(Exception):
    """A compare-and-set inside TX-B lost: roll the whole transaction back."""


def conversation_session_id(branch_id: str) -> str:
    """The `session_id` of a branch's LCM conversation."""
    return f"turns:{branch_id}"


def branch_with_conversation(*, session: Session, owner, label: str, **fields) -> Branch:
    """A new Branch with its own (empty) LCM conversation; call inside a transaction."""
    branch_id = new_id()
    conversation, _ = conversation_create(
        owner=owner,
        session_id=conversation_session_id(branch_id),
        title=f"{session.title or 'chat session'} [{label or 'main'}]"[:500],
    )
    return Branch.objects.create(
        id=branch_id, session=session, conversation=conversation, label=label, **fields
    )


def _pins_tokens(pins: list[dict]) -> int:
    return sum(estimate(p["text"]) for p in pins)


def state_commit(
    *, turn: UserTurn, summary: str, librarian: dict, base_summary: str
) -> StateCheckpoint | None:
    """TX-B: insert the state for `turn`, set turn.state_after + phase state_committed and
    advance the head, all or nothing. Returns None (and writes nothing) when the turn is
    not the next to commit, was already committed, or the head summary changed since the
    librarian read it (`base_summary`): the caller re-plans.

    Pins are taken from the head at commit time, so a pin added while the librarian ran
    is kept."""
    try:
        with transaction.atomic(durable=True):
            branch = Branch.objects.select_for_update().get(pk=turn.branch_id)
            head = StateCheckpoint.objects.get(pk=branch.head_state_id)
            if head.summary != base_summary:
                return None
            earlier_pending = UserTurn.objects.filter(
                branch_id=branch.pk,
                turn_seq__lt=turn.turn_seq,
                phase__in=FINALIZED_PHASES,
                state_after__isnull=True,
            ).exists()
            if earlier_pending:
                return None
            state = StateCheckpoint.objects.create(
                session_id=turn.session_id,
                branch=branch,
                state_seq=branch.head_seq + 1,
                parent=head,
                summary=summary,
                pinned_facts=head.pinned_facts,
                token_count_est=estimate(summary) + _pins_tokens(head.pinned_facts),
                reason=StateReason.TURN,
                source_turn=turn,
                librarian=librarian,
            )
            moved = UserTurn.objects.filter(
                pk=turn.pk, phase=Phase.RESPONSE_FINALIZED, state_after__isnull=True
            ).update(state_after=state, phase=Phase.STATE_COMMITTED, updated_at=timezone.now())
            if moved != 1:
                raise _Lost
            advanced = Branch.objects.filter(pk=branch.pk, head_seq=branch.head_seq).update(
                head_state=state, head_seq=state.state_seq
            )
            if advanced != 1:
                raise _Lost
            job_enqueue(job_type="index_turn", turn=turn)
            # The next turn's summarize job may be waiting for this commit.
            transaction.on_commit(lambda: _wake_next(turn))
    except _Lost:
        return None
    turn.state_after = state
    turn.phase = Phase.STATE_COMMITTED
    return state


def _wake_next(turn: UserTurn) -> None:
    job_dispatch_waiting(branch_id=turn.branch_id, after_seq=turn.turn_seq)


def _new_head_state(*, branch: Branch, reason: str, pins: list[dict]) -> StateCheckpoint:
    """Inside a transaction holding the branch lock: a state copying the head's summary
    with new pins, CAS-advancing the head."""
    head = StateCheckpoint.objects.get(pk=branch.head_state_id)
    state = StateCheckpoint.objects.create(
        session_id=branch.session_id,
        branch=branch,
        state_seq=branch.head_seq + 1,
        parent=head,
        summary=head.summary,
        pinned_facts=pins,
        token_count_est=estimate(head.summary) + _pins_tokens(pins),
        reason=reason,
        librarian={},
    )
    advanced = Branch.objects.filter(pk=branch.pk, head_seq=branch.head_seq).update(
        head_state=state, head_seq=state.state_seq
    )
    if advanced != 1:  # impossible under the lock; never write a state beside the head
        raise RuntimeError(f"branch {branch.pk} head moved under its lock")
    return state


def pin_add(*, branch: Branch, text: str) -> tuple[StateCheckpoint, dict]:
    """Pin a fact on the branch: a new state whose pins end with it."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput("text must not be empty", extra={"field": "text"})
    if len(text) > MAX_PIN_CHARS:
        raise InvalidInput(
            f"a pinned fact is at most {MAX_PIN_CHARS} characters", extra={"field": "text"}
        )
    pin = {"id": new_id(), "text": text, "created_at": timezone.now().isoformat()}
    with transaction.atomic(durable=True):
        locked = Branch.objects.select_for_update().get(pk=branch.pk)
        head = StateCheckpoint.objects.get(pk=locked.head_state_id)
        state = _new_head_state(
            branch=locked, reason=StateReason.PIN, pins=[*head.pinned_facts, pin]
        )
    return state, pin


def pin_remove(*, branch: Branch, pin_id: str) -> StateCheckpoint:
    with transaction.atomic(durable=True):
        locked = Branch.objects.select_for_update().get(pk=branch.pk)
        head = StateCheckpoint.objects.get(pk=locked.head_state_id)
        kept = [p for p in head.pinned_facts if p["id"] != pin_id]
        if len(kept) == len(head.pinned_facts):
            raise NotFound(f"pinned fact {pin_id} does not exist on branch {branch.pk}")
        return _new_head_state(branch=locked, reason=StateReason.UNPIN, pins=kept)


# --- fork, rollback, activation ----------------------------------------------------------


def _fork_message_seq(branch: Branch, fork_turn: UserTurn | None) -> int:
    """The last message of the parent's conversation the fork may see (its fork turn's
    last one), looked up by exact external ids (an index lookup, whatever the history)."""
    if fork_turn is None:
        return 0
    steps = ProviderStep.objects.filter(turn=fork_turn).count()
    ids = [f"turn:{fork_turn.pk}:user"]
    for index in range(steps):
        ids += [
            f"turn:{fork_turn.pk}:step{index}:assistant",
            f"turn:{fork_turn.pk}:step{index}:tool_results",
        ]

    def top() -> int | None:
        return Message.objects.filter(
            conversation_id=branch.conversation_id, external_id__in=ids
        ).aggregate(top=Max("seq"))["top"]

    seq = top()
    if seq is None and mirror_turn(fork_turn):  # its mirror never ran: heal it first
        seq = top()
    return seq or 0


def _fork_at(
    *, branch: Branch, state: StateCheckpoint, fork_turn: UserTurn | None, reason: str, label: str
) -> Branch:
    """A new branch of `branch` whose head is a copy of `state`; no history is copied (a
    constant number of queries whatever the history length)."""
    session = Session.objects.only("id", "title", "owner_id").get(pk=branch.session_id)
    message_seq = _fork_message_seq(branch, fork_turn)
    with transaction.atomic(durable=True):
        child = branch_with_conversation(
            session=session,
            owner=get_user_model()(pk=session.owner_id),  # no query: only the id is used
            label=label,
            parent=branch,
            fork_turn_seq=fork_turn.turn_seq if fork_turn else 0,
            fork_message_seq=message_seq,
            head_seq=state.state_seq,
            # Turn numbers continue from the fork point (ancestry turns keep theirs).
            last_turn_seq=fork_turn.turn_seq if fork_turn else 0,
        )
        base = StateCheckpoint.objects.create(
            session_id=branch.session_id,
            branch=child,
            state_seq=state.state_seq,
            parent=state,
            summary=state.summary,
            pinned_facts=state.pinned_facts,
            token_count_est=state.token_count_est,
            reason=reason,
            librarian={"forked_from": state.pk},
        )
        Branch.objects.filter(pk=child.pk).update(base_state=base, head_state=base)
        if reason == StateReason.ROLLBACK:
            Session.objects.filter(pk=branch.session_id).update(
                active_branch=child, updated_at=timezone.now()
            )
    child.base_state = child.head_state = base
    return child


def branch_fork(*, branch: Branch, turn_id: str | None = None, label: str = "") -> Branch:
    """Fork at a committed turn of `branch` (default: at its head)."""
    if turn_id:
        turn = (
            UserTurn.objects.filter(pk=turn_id, branch_id=branch.pk)
            .select_related("state_after")
            .first()
        )
        if turn is None:
            raise NotFound(f"turn {turn_id} does not exist on branch {branch.pk}")
        if turn.state_after_id is None or turn.phase == Phase.FAILED:
            raise TurnNotCommitted(
                f"turn {turn_id} is {turn.phase} and has no committed state yet; fork at a "
                "committed turn (or commit pending turns first: POST branches/{id}/commit/)",
                extra={"turn_id": turn_id, "phase": turn.phase},
            )
        state = turn.state_after
    else:
        state = StateCheckpoint.objects.get(pk=branch.head_state_id)
        turn = (
            UserTurn.objects.filter(branch_id=branch.pk, state_after__isnull=False)
            .order_by("-turn_seq")
            .first()
        )
    return _fork_at(
        branch=branch,
        state=state,
        fork_turn=turn,
        reason=StateReason.FORK,
        label=label or f"fork of {branch.label or branch.pk}",
    )


def branch_rollback(*, branch: Branch, state_seq: int, label: str = "") -> Branch:
    """Roll back to an earlier state of `branch`: a fork at that state, made active."""
    state = StateCheckpoint.objects.filter(branch_id=branch.pk, state_seq=state_seq).first()
    if state is None:
        raise NotFound(f"branch {branch.pk} has no state {state_seq}")
    turn = (
        UserTurn.objects.filter(
            branch_id=branch.pk, state_after__isnull=False, state_after__state_seq__lte=state_seq
        )
        .order_by("-turn_seq")
        .first()
    )
    return _fork_at(
        branch=branch,
        state=state,
        fork_turn=turn,
        reason=StateReason.ROLLBACK,
        label=label or f"rollback of {branch.label or branch.pk} to state {state_seq}",
    )


def branch_activate(*, session: Session, branch_id: str) -> Session:
    if not Branch.objects.filter(pk=branch_id, session_id=session.pk).exists():
        raise NotFound(f"branch {branch_id} does not exist in session {session.pk}")
    Session.objects.filter(pk=session.pk).update(
        active_branch_id=branch_id, updated_at=timezone.now()
    )
    session.refresh_from_db()
    return session
