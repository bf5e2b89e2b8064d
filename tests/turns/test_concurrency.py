"""TX-B under concurrency: several committers race for the same turn (and a pin lands in
between); exactly one state is committed and the head is never corrupted."""

from __future__ import annotations

import pytest

from tests.factories import UserFactory
from tests.support.concurrent import run_together
from tests.turns.conftest import send
from turns import services
from turns.branches import pin_add, state_commit
from turns.jobs import summarize_turn
from turns.librarian import librarian_for_turn
from turns.models import Branch, StateCheckpoint, UserTurn


@pytest.mark.django_db(transaction=True)
def test_racing_committers_commit_one_state():
    owner = UserFactory(username="racer")
    chat = services.session_create(owner=owner)
    turn = send(chat, "race me: the plan uses src/race.py")
    head = StateCheckpoint.objects.get(branch_id=chat.active_branch_id, state_seq=0)
    planned = librarian_for_turn(turn=UserTurn.objects.get(pk=turn.pk), head=head)

    def commit():
        return state_commit(
            turn=UserTurn.objects.get(pk=turn.pk),
            summary=planned.summary,
            librarian=planned.info,
            base_summary=head.summary,
        )

    results = run_together(commit, times=6, timeout=60)
    assert sum(r is not None for r in results) == 1
    branch = Branch.objects.get(pk=chat.active_branch_id)
    states = StateCheckpoint.objects.filter(branch=branch).order_by("state_seq")
    assert list(states.values_list("state_seq", flat=True)) == [0, 1]
    assert branch.head_state_id == states.last().pk and branch.head_seq == 1
    assert UserTurn.objects.get(pk=turn.pk).state_after_id == branch.head_state_id


@pytest.mark.django_db(transaction=True)
def test_racing_summarize_jobs_and_pins_lose_nothing():
    owner = UserFactory(username="racer2")
    chat = services.session_create(owner=owner)
    turns = [send(chat, f"turn {i} touches lib/part_{i}.py") for i in range(4)]
    branch = Branch.objects.get(pk=chat.active_branch_id)
    counter = iter(range(1000))

    def work():
        n = next(counter)
        if n % 3 == 0:
            return pin_add(branch=branch, text=f"pin {n}")
        for turn in turns:
            summarize_turn(turn_id=turn.pk)
        return None

    run_together(work, times=6, timeout=60)
    for turn in turns:
        summarize_turn(turn_id=turn.pk)  # whatever a lost race left behind
    branch.refresh_from_db()
    states = list(StateCheckpoint.objects.filter(branch=branch).order_by("state_seq"))
    assert [s.state_seq for s in states] == list(range(len(states)))  # gap-free
    assert branch.head_state_id == states[-1].pk and branch.head_seq == states[-1].state_seq
    assert sum(s.reason == "turn" for s in states) == 4
    assert [s.source_turn_id for s in states if s.reason == "turn"] == [t.pk for t in turns]
    assert sorted(p["text"] for p in states[-1].pinned_facts) == ["pin 0", "pin 3"]
