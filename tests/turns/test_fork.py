"""Fork and rollback (SRD 2.2, 17.2): a new branch at a committed state, copying nothing,
seeing exactly its ancestry; rollback is a fork made active."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from conversations.models import Conversation, Message
from core.api.errors import InvalidInput, NotFound
from tests.turns.conftest import send
from turns import services
from turns.branches import branch_fork, branch_rollback
from turns.models import Branch, Phase, Session, StateCheckpoint, UserTurn
from turns.selectors import branch_ancestry, branch_history, branch_turn_ancestry


def _main(chat) -> Branch:
    return Branch.objects.get(pk=chat.active_branch_id)


def test_a_fork_at_a_committed_turn_sees_its_ancestry_and_never_later_parent_turns(chat):
    t1 = send(chat, "alpha", commit=True)
    t2 = send(chat, "bravo", commit=True)
    send(chat, "charlie", commit=True)
    main = _main(chat)
    fork = branch_fork(branch=main, turn_id=t2.pk)
    assert fork.parent_id == main.pk and fork.fork_turn_seq == 2
    assert fork.head_seq == t2.state_after.state_seq
    base = StateCheckpoint.objects.get(pk=fork.head_state_id)
    assert base.reason == "fork" and base.parent_id == t2.state_after_id
    assert base.summary == t2.state_after.summary
    assert [t.pk for t in branch_history(branch=fork)] == [t1.pk, t2.pk]
    # the fork's own conversation starts empty; the ancestry limits the parent's
    assert Message.objects.filter(conversation_id=fork.conversation_id).count() == 0
    parent_limit = (
        Message.objects.filter(
            conversation_id=main.conversation_id, external_id=f"turn:{t2.pk}:step0:assistant"
        )
        .get()
        .seq
    )
    assert branch_ancestry(fork) == [
        (fork.conversation_id, None),
        (main.conversation_id, parent_limit),
    ]
    # a turn on the fork continues the numbering and sees none of "charlie"
    fork_turn = send(chat, "delta", branch=fork)
    assert fork_turn.turn_seq == 3 and fork_turn.branch_id == fork.pk
    context = fork_turn.context
    assert "charlie" not in str(context)
    assert [t.turn_seq for t in branch_history(branch=fork)] == [1, 2, 3]


def test_a_fork_of_a_fork_sees_each_ancestor_up_to_its_fork_point(chat):
    send(chat, "one", commit=True)
    two = send(chat, "two", commit=True)
    send(chat, "three", commit=True)
    child = branch_fork(branch=_main(chat), turn_id=two.pk)
    c3 = send(chat, "child three", branch=child, commit=True)
    send(chat, "child four", branch=child, commit=True)
    grandchild = branch_fork(branch=child, turn_id=c3.pk)
    assert branch_turn_ancestry(grandchild) == [
        (grandchild.pk, None),
        (child.pk, 3),
        (_main(chat).pk, 2),
    ]
    assert [t.user_message["rendered_text"] for t in branch_history(branch=grandchild)] == [
        "one",
        "two",
        "child three",
    ]


def test_a_fork_at_a_turn_that_is_not_committed_is_refused_and_stores_nothing(chat):
    pending = send(chat, "not yet committed")
    branches = Branch.objects.count()
    with pytest.raises(InvalidInput) as caught:
        branch_fork(branch=_main(chat), turn_id=pending.pk)
    assert caught.value.code == "turn_not_committed"
    assert Branch.objects.count() == branches


def test_a_fork_at_a_turn_of_another_branch_is_a_404(chat, user):
    other = services.session_create(owner=user, title="other")
    foreign = send(other, "elsewhere", commit=True)
    with pytest.raises(NotFound):
        branch_fork(branch=_main(chat), turn_id=foreign.pk)


def test_a_fork_at_the_head_by_default(chat):
    send(chat, "one", commit=True)
    fork = branch_fork(branch=_main(chat))
    assert fork.head_seq == 1 and fork.fork_turn_seq == 1
    assert (
        StateCheckpoint.objects.get(pk=fork.head_state_id).summary == _main(chat).head_state.summary
    )


def test_rollback_is_a_fork_at_an_earlier_state_made_active(chat):
    first = send(chat, "keep this", commit=True)
    send(chat, "undo this", commit=True)
    main = _main(chat)
    rolled = branch_rollback(branch=main, state_seq=first.state_after.state_seq)
    assert Session.objects.get(pk=chat.pk).active_branch_id == rolled.pk
    assert StateCheckpoint.objects.get(pk=rolled.head_state_id).reason == "rollback"
    assert [t.pk for t in branch_history(branch=rolled)] == [first.pk]
    # nothing deleted on the original branch
    assert UserTurn.objects.filter(branch=main).count() == 2
    assert Branch.objects.get(pk=main.pk).head_seq == 2
    with pytest.raises(NotFound):
        branch_rollback(branch=main, state_seq=99)


def _bulk_history(chat, turns: int) -> Branch:
    """`turns` committed turns' worth of rows on the main branch, written in bulk (the
    real write path is exercised elsewhere; here only the size matters)."""
    main = _main(chat)
    head = StateCheckpoint.objects.get(pk=main.head_state_id)
    now = timezone.now()
    UserTurn.objects.bulk_create(
        [
            UserTurn(
                session=chat,
                branch=main,
                turn_seq=i,
                state_before=head,
                state_after=head,  # committed (the states themselves do not matter here)
                phase=Phase.DONE,
                user_message={"role": "user", "blocks": [], "rendered_text": f"t{i}"},
                primary_provider="offline",
                primary_model="offline",
            )
            for i in range(1, turns + 1)
        ],
        batch_size=2000,
    )
    Message.objects.bulk_create(
        [
            Message(
                conversation_id=main.conversation_id,
                seq=i,
                role="user",
                content=f"t{i}",
                token_count=1,
                created_at=now,
                external_id=f"bulk:{i}",
            )
            for i in range(1, turns + 1)
        ],
        batch_size=2000,
    )
    Branch.objects.filter(pk=main.pk).update(last_turn_seq=turns)
    Conversation.objects.filter(pk=main.conversation_id).update(last_seq=turns)
    last = send(chat, "the last one", commit=True)
    assert last.turn_seq == turns + 1
    return _main(chat)


def _fork_queries(branch: Branch) -> int:
    with CaptureQueriesContext(connection) as queries:
        branch_fork(branch=branch)
    return len(queries.captured_queries)


def test_a_fork_costs_the_same_queries_for_10_and_10000_turns(chat, user):
    small = _bulk_history(chat, 10)
    big_session = services.session_create(owner=user, title="big")
    big = _bulk_history(big_session, 10_000)
    assert _fork_queries(small) == _fork_queries(big)
    assert _fork_queries(big) <= 14
