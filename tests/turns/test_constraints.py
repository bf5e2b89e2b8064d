"""The database itself refuses duplicate sequence numbers, unknown phases, rewritten
transcript content, updated states and deleted turn rows (both backends)."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction

from tests.turns.conftest import send
from turns.models import Branch, ProviderStep, StateCheckpoint, UserTurn


def _sql(statement: str, params=()):
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(statement, params)


def test_one_state_per_branch_and_seq(chat):
    head = StateCheckpoint.objects.get(branch_id=chat.active_branch_id, state_seq=0)
    with pytest.raises(IntegrityError), transaction.atomic():
        StateCheckpoint.objects.create(
            session=chat, branch_id=head.branch_id, state_seq=0, reason="turn"
        )
    assert StateCheckpoint.objects.filter(branch_id=head.branch_id).count() == 1


def test_one_turn_per_branch_and_seq(chat):
    turn = send(chat, "first")
    with pytest.raises(IntegrityError), transaction.atomic():
        UserTurn.objects.create(
            session=chat,
            branch_id=turn.branch_id,
            turn_seq=turn.turn_seq,
            state_before_id=turn.state_before_id,
            user_message={"role": "user", "blocks": [], "rendered_text": "dup"},
            primary_provider="offline",
            primary_model="offline",
        )
    assert UserTurn.objects.filter(branch_id=turn.branch_id).count() == 1


def test_one_step_per_turn_and_index(chat):
    turn = send(chat, "first")
    with pytest.raises(IntegrityError), transaction.atomic():
        ProviderStep.objects.create(
            turn=turn, step_index=0, provider="offline", model_id="offline", request_json={}
        )
    assert ProviderStep.objects.filter(turn=turn).count() == 1


def test_an_unknown_phase_is_refused(chat):
    turn = send(chat, "first")
    with pytest.raises(IntegrityError):
        _sql("UPDATE turns_userturn SET phase = 'bogus' WHERE id = %s", [turn.pk])
    assert UserTurn.objects.get(pk=turn.pk).phase == "response_finalized"


def test_the_user_message_cannot_be_rewritten(chat):
    turn = send(chat, "what I said")
    with pytest.raises(IntegrityError, match="immutable"):
        _sql(
            "UPDATE turns_userturn SET user_message = %s WHERE id = %s",
            ['{"role": "user", "blocks": [], "rendered_text": "rewritten"}', turn.pk],
        )
    stored = UserTurn.objects.get(pk=turn.pk)
    assert stored.user_message["rendered_text"] == "what I said"


def test_a_stored_answer_cannot_be_rewritten(chat):
    turn = send(chat, "question")
    before = UserTurn.objects.get(pk=turn.pk).final_assistant_message
    with pytest.raises(IntegrityError, match="immutable"), transaction.atomic():
        UserTurn.objects.filter(pk=turn.pk).update(
            final_assistant_message={"role": "assistant", "blocks": [], "rendered_text": "x"}
        )
    assert UserTurn.objects.get(pk=turn.pk).final_assistant_message == before


def test_other_turn_columns_still_move(chat):
    """The triggers guard content only: phase and telemetry updates pass."""
    turn = send(chat, "question")
    UserTurn.objects.filter(pk=turn.pk).update(telemetry={"x": 1})
    assert UserTurn.objects.get(pk=turn.pk).telemetry == {"x": 1}


def test_a_state_is_never_updated(chat):
    state = StateCheckpoint.objects.get(branch_id=chat.active_branch_id)
    with pytest.raises(IntegrityError, match="immutable"), transaction.atomic():
        StateCheckpoint.objects.filter(pk=state.pk).update(summary="rewritten")
    assert StateCheckpoint.objects.get(pk=state.pk).summary == ""


def test_a_step_request_is_never_rewritten(chat):
    turn = send(chat, "question")
    step = ProviderStep.objects.get(turn=turn)
    with pytest.raises(IntegrityError, match="immutable"), transaction.atomic():
        ProviderStep.objects.filter(pk=step.pk).update(request_json={"forged": True})
    assert ProviderStep.objects.get(pk=step.pk).request_json != {"forged": True}


@pytest.mark.parametrize("table", ["turns_statecheckpoint", "turns_userturn", "turns_providerstep"])
def test_turn_rows_are_never_deleted(chat, table):
    send(chat, "question", commit=True)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM {table}")
        before = cursor.fetchone()[0]
    # Raw DELETE: the trigger refuses even where no foreign key would.
    with pytest.raises(IntegrityError, match="never deleted"):
        _sql(f"DELETE FROM {table}")
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM {table}")
        assert cursor.fetchone()[0] == before
    assert before >= 1


def test_the_branch_head_is_a_state_of_record(chat):
    branch = Branch.objects.get(pk=chat.active_branch_id)
    assert branch.head_state.state_seq == 0
    assert branch.head_seq == 0
