"""Reads for the console pages: a session's header status, a branch's visible turns (its own
and its ancestry's, paged), the branch tree, the pinned facts and the pending turns.

Every page first asks `session_for_user` (owner scoping: anyone else gets a 404, like the
explorer's conversation checkpoint); everything else takes the session it returned.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Prefetch
from django.http import Http404

from core.api.errors import NotFound
from turns.models import (
    FINALIZED_PHASES,
    OPEN_PHASES,
    Branch,
    ProviderStep,
    Session,
    StateCheckpoint,
    UserTurn,
)
from turns.selectors import ancestry_turn_filter, session_get_for_user, sessions_visible_to

TURNS_PAGE = 50
SESSIONS_PAGE = 50
_MAX_ID_LENGTH = 26


def session_for_user(*, user, session_id: str) -> Session:
    """The session if `user` may see it (the turns app's one checkpoint); Http404 otherwise,
    with no hint that it exists."""
    if len(session_id) > _MAX_ID_LENGTH:
        raise Http404("session not found")
    try:
        return session_get_for_user(user=user, session_id=session_id)
    except NotFound:
        raise Http404("session not found") from None


def branch_of(*, session: Session, branch_id: str | None = None) -> Branch:
    """The named branch of the session (404 if it belongs elsewhere), else the active one."""
    if branch_id:
        branch = (
            Branch.objects.select_related("head_state", "conversation")
            .filter(pk=branch_id[:_MAX_ID_LENGTH], session=session)
            .first()
        )
        if branch is None:
            raise Http404("branch not found")
        return branch
    branch_id = session.active_branch_id
    branch = (
        Branch.objects.select_related("head_state", "conversation")
        .filter(session=session)
        .order_by("-pk" if branch_id is None else "pk")
    )
    branch = branch.filter(pk=branch_id).first() if branch_id else branch.first()
    if branch is None:
        raise Http404("session has no branch")
    return branch


def session_list_page(*, user, page: int = 1) -> tuple[list[Session], bool]:
    start = (page - 1) * SESSIONS_PAGE
    rows = list(
        sessions_visible_to(user)
        .select_related("active_branch")
        .order_by("-updated_at", "-pk")[start : start + SESSIONS_PAGE + 1]
    )
    return rows[:SESSIONS_PAGE], len(rows) > SESSIONS_PAGE


def _with_steps(queryset):
    return queryset.prefetch_related(
        Prefetch("steps", queryset=ProviderStep.objects.order_by("step_index"))
    ).select_related("state_after")


def turns_page(
    *, branch: Branch, before: int | None = None, limit: int = TURNS_PAGE
) -> tuple[list[UserTurn], bool]:
    """The newest `limit` visible turns (before turn_seq `before`), oldest first, and
    whether older ones exist."""
    queryset = UserTurn.objects.filter(ancestry_turn_filter(branch))
    if before is not None:
        queryset = queryset.filter(turn_seq__lt=before)
    rows = list(_with_steps(queryset.order_by("-turn_seq"))[: limit + 1])
    has_more = len(rows) > limit
    rows = rows[:limit]
    rows.reverse()
    return rows, has_more


def turn_for_session(*, session: Session, turn_id: str) -> UserTurn:
    turn = (
        _with_steps(UserTurn.objects.filter(pk=turn_id[:_MAX_ID_LENGTH], session=session))
        .select_related("branch", "state_before")
        .first()
    )
    if turn is None:
        raise Http404("turn not found")
    return turn


def pending_turns(*, branch: Branch) -> list[UserTurn]:
    """Answered turns of this branch not yet summarized into a state (SRD 6.2), in order."""
    return list(
        _with_steps(
            UserTurn.objects.filter(
                branch=branch, phase__in=FINALIZED_PHASES, state_after__isnull=True
            ).order_by("turn_seq")
        )
    )


@dataclass(frozen=True)
class Status:
    session_id: str
    session_title: str
    branch_id: str
    branch_label: str
    head_seq: int | None
    head_state_id: str | None
    pending: int
    phase: str | None  # of the branch's newest turn
    last_turn_id: str | None
    running_turn_id: str | None  # a turn still open (accepted .. responding)
    # The phases of the branch's newest turns, so the page's chips follow them (id -> phase)
    turn_phases: dict[str, str]

    def as_dict(self) -> dict:
        return dict(self.__dict__)


RECENT_TURN_PHASES = 50


@dataclass(frozen=True)
class _Last:
    pk: str
    phase: str


def status(*, session: Session, branch: Branch) -> Status:
    head = branch.head_state
    recent = list(
        UserTurn.objects.filter(branch=branch)
        .order_by("-turn_seq")
        .values_list("pk", "phase")[:RECENT_TURN_PHASES]
    )
    last = _Last(*recent[0]) if recent else None
    pending = UserTurn.objects.filter(
        branch=branch, phase__in=FINALIZED_PHASES, state_after__isnull=True
    ).count()
    return Status(
        session_id=session.pk,
        session_title=session.title,
        branch_id=branch.pk,
        branch_label=branch_label(branch),
        head_seq=head.state_seq if head else None,
        head_state_id=head.pk if head else None,
        pending=pending,
        phase=last.phase if last else None,
        last_turn_id=last.pk if last else None,
        running_turn_id=last.pk if last and last.phase in OPEN_PHASES else None,
        turn_phases=dict(recent),
    )


def branch_label(branch: Branch) -> str:
    return branch.label or ("main" if branch.parent_id is None else f"fork {branch.pk[-6:]}")


@dataclass
class BranchNode:
    branch: Branch
    label: str
    depth: int
    turns: int
    active: bool


def branch_tree(*, session: Session) -> list[BranchNode]:
    """The session's branches depth-first from the root(s), children in creation order."""
    branches = list(
        Branch.objects.filter(session=session)
        .select_related("head_state")
        .order_by("created_at", "pk")
    )
    children: dict[str | None, list[Branch]] = {}
    for b in branches:
        children.setdefault(b.parent_id, []).append(b)
    known = {b.pk for b in branches}
    roots = [b for b in branches if b.parent_id is None or b.parent_id not in known]
    out: list[BranchNode] = []

    def walk(b: Branch, depth: int) -> None:
        out.append(
            BranchNode(b, branch_label(b), depth, b.last_turn_seq, b.pk == session.active_branch_id)
        )
        for child in children.get(b.pk, []):
            walk(child, depth + 1)

    for root in roots:
        walk(root, 0)
    return out


def pinned_facts(*, branch: Branch) -> list[dict]:
    head = branch.head_state
    return list(head.pinned_facts or []) if head else []


def states(*, branch: Branch, limit: int = 50) -> list[StateCheckpoint]:
    """The branch's newest states (rollback targets), newest first."""
    return list(
        StateCheckpoint.objects.filter(branch=branch)
        .order_by("-state_seq")
        .only("pk", "state_seq", "reason", "created_at", "token_count_est", "source_turn_id")[
            :limit
        ]
    )
