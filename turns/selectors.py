"""Reads of the turn engine, and the one access checkpoint: a session (and everything in
it) is visible to its owner only; anything else is a 404, as for conversations."""

from __future__ import annotations

from django.db import connection
from django.db.models import Prefetch, Q, QuerySet

from core.api.errors import NotFound
from turns.models import (
    FINALIZED_PHASES,
    Branch,
    ProviderStep,
    Session,
    StateCheckpoint,
    UserTurn,
)


def sessions_visible_to(user) -> QuerySet[Session]:
    if not user or not user.is_authenticated:
        return Session.objects.none()
    return Session.objects.filter(owner=user)


def session_get_for_user(*, user, session_id: str) -> Session:
    session = sessions_visible_to(user).filter(pk=session_id).first()
    if session is None:
        raise NotFound(f"session {session_id} not found")
    return session


def session_list_for_user(*, user) -> QuerySet[Session]:
    return sessions_visible_to(user)


def branch_get_for_user(*, user, branch_id: str) -> Branch:
    branch = (
        Branch.objects.filter(pk=branch_id, session__in=sessions_visible_to(user))
        .select_related("session")
        .first()
    )
    if branch is None:
        raise NotFound(f"branch {branch_id} not found")
    return branch


def branch_for_turn(*, session: Session, branch_id: str | None) -> Branch:
    """The branch a new turn goes to: `branch_id` (of this session, else 404) or the
    session's active branch."""
    wanted = branch_id or session.active_branch_id
    branch = Branch.objects.filter(pk=wanted, session_id=session.pk).first()
    if branch is None:
        raise NotFound(f"branch {wanted} does not exist in session {session.pk}")
    return branch


def turn_get_for_user(*, user, turn_id: str) -> UserTurn:
    turn = (
        UserTurn.objects.filter(pk=turn_id, session__in=sessions_visible_to(user))
        .select_related("session", "branch")
        .first()
    )
    if turn is None:
        raise NotFound(f"turn {turn_id} not found")
    return turn


def step_get_for_user(*, user, step_id: str) -> ProviderStep:
    step = (
        ProviderStep.objects.filter(pk=step_id, turn__session__in=sessions_visible_to(user))
        .select_related("turn")
        .first()
    )
    if step is None:
        raise NotFound(f"step {step_id} not found")
    return step


def _with_details(queryset: QuerySet[UserTurn]) -> QuerySet[UserTurn]:
    steps = ProviderStep.objects.order_by("step_index").defer("request_json", "response_json")
    return queryset.select_related("state_before", "state_after").prefetch_related(
        Prefetch("steps", queryset=steps)
    )


def turn_detail(*, turn_id: str) -> UserTurn:
    return _with_details(UserTurn.objects.filter(pk=turn_id)).get()


# --- ancestry ------------------------------------------------------------------------------

_ANCESTRY_SQL = """
WITH RECURSIVE chain(id, parent_id, conversation_id, limit_seq, limit_turn, fork_message_seq,
                     fork_turn_seq, depth) AS (
    SELECT id, parent_id, conversation_id, CAST(NULL AS BIGINT), CAST(NULL AS BIGINT),
           fork_message_seq, fork_turn_seq, 0
    FROM turns_branch WHERE id = %s
    UNION ALL
    SELECT p.id, p.parent_id, p.conversation_id, c.fork_message_seq, c.fork_turn_seq,
           p.fork_message_seq, p.fork_turn_seq, c.depth + 1
    FROM turns_branch p JOIN chain c ON p.id = c.parent_id
    WHERE c.depth < 10000
)
SELECT id, conversation_id, limit_seq, limit_turn FROM chain ORDER BY depth
"""


def _ancestry_rows(branch: Branch) -> list[tuple[str, int, int | None, int | None]]:
    with connection.cursor() as cursor:
        cursor.execute(_ANCESTRY_SQL, [branch.pk])
        return [(r[0], r[1], r[2], r[3]) for r in cursor.fetchall()]


def branch_ancestry(branch: Branch) -> list[tuple[int, int | None]]:
    """[(conversation_id, max_message_seq or None)]: the branch's own conversation (no
    limit) then each ancestor's up to its fork point. One query (a recursive CTE)."""
    return [(conversation_id, limit) for _, conversation_id, limit, _ in _ancestry_rows(branch)]


def branch_turn_ancestry(branch: Branch) -> list[tuple[str, int | None]]:
    """[(branch_id, max_turn_seq or None)]: the same chain by branch and turn number."""
    return [(branch_id, limit) for branch_id, _, _, limit in _ancestry_rows(branch)]


def ancestry_turn_filter(branch: Branch, prefix: str = "") -> Q:
    """A Q selecting the turns visible on `branch` (own turns and ancestry up to each fork
    point); `prefix` for related lookups (e.g. "source_turn__")."""
    condition = Q(pk__in=[])
    for branch_id, limit in branch_turn_ancestry(branch):
        part = Q(**{f"{prefix}branch_id": branch_id})
        if limit is not None:
            part &= Q(**{f"{prefix}turn_seq__lte": limit})
        condition |= part
    return condition


def branch_history(*, branch: Branch) -> QuerySet[UserTurn]:
    """Every turn the branch sees, in turn_seq order, with its steps."""
    return _with_details(UserTurn.objects.filter(ancestry_turn_filter(branch))).order_by("turn_seq")


# --- session and branch figures ------------------------------------------------------------


def pending_count(*, branch_id: str) -> int:
    return UserTurn.objects.filter(
        branch_id=branch_id, phase__in=FINALIZED_PHASES, state_after__isnull=True
    ).count()


def session_detail(*, session: Session) -> dict:
    branches = list(
        Branch.objects.filter(session=session)
        .select_related("head_state")
        .order_by("created_at", "id")
    )
    pending = dict.fromkeys((b.pk for b in branches), 0)
    for row in UserTurn.objects.filter(
        session=session, phase__in=FINALIZED_PHASES, state_after__isnull=True
    ).values_list("branch_id", flat=True):
        pending[row] = pending.get(row, 0) + 1
    return {"session": session, "branches": branches, "pending": pending}


def branch_state(*, branch: Branch) -> StateCheckpoint:
    return StateCheckpoint.objects.get(pk=branch.head_state_id)


def offline_authored_external_ids(*, turn_id: str) -> set[str]:
    """External ids of a turn's mirrored messages that the offline provider wrote. Its
    answers are canned text quoting the assembled context: they stay in the transcript but
    are not memory (indexed, they would come back as "best matching memory" and the demo
    would retrieve its own boilerplate). docs/memory.md, "What is indexed"."""
    indexes = ProviderStep.objects.filter(turn_id=turn_id, provider="offline").values_list(
        "step_index", flat=True
    )
    return {f"turn:{turn_id}:step{index}:assistant" for index in indexes}
