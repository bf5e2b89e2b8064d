"""The turn lifecycle (SRD 6): phases, TX boundaries, input gating, pending turns, commits
in branch order, indexing, and the LCM mirror of every turn."""

from __future__ import annotations

import pytest

from conversations.models import Conversation, Message, MessagePart
from core.api.errors import Conflict
from retrieval.grep import GrepRequest, grep_for_user
from tests.turns.conftest import send
from turns import services
from turns.context import AssembledContext, context_prepare
from turns.jobs import commit_pending, index_turn, job_run, summarize_turn
from turns.models import Branch, JobType, Phase, ProviderStep, StateCheckpoint, TurnJob, UserTurn
from turns.phases import turn_fail
from turns.reconcile import reconcile


def test_a_session_starts_with_a_main_branch_its_conversation_and_state_zero(chat, user):
    branch = Branch.objects.get(pk=chat.active_branch_id)
    assert branch.label == "main"
    assert branch.head_seq == 0 and branch.last_turn_seq == 0
    state = StateCheckpoint.objects.get(pk=branch.head_state_id)
    assert (state.state_seq, state.reason, state.summary, state.pinned_facts) == (
        0,
        "initial",
        "",
        [],
    )
    assert branch.base_state_id == state.pk
    conversation = Conversation.objects.get(pk=branch.conversation_id)
    assert conversation.owner == user
    assert conversation.session_id == f"turns:{branch.pk}"


def test_a_turn_runs_to_response_finalized_with_its_step_and_context(chat):
    turn = send(chat, "Please look at src/engine/core.py")
    assert turn.phase == Phase.RESPONSE_FINALIZED
    assert turn.turn_seq == 1
    assert turn.state_after_id is None and turn.is_pending
    assert "[offline provider]" in turn.final_assistant_message["rendered_text"]
    step = ProviderStep.objects.get(turn=turn)
    assert step.step_index == 0 and step.outcome["status"] == "completed"
    assert step.request_json["messages"][-1]["rendered_text"] == "Please look at src/engine/core.py"
    stored = UserTurn.objects.get(pk=turn.pk)
    context = AssembledContext.from_dict(stored.context)
    assert context.user["rendered_text"] == "Please look at src/engine/core.py"
    assert "untrusted data" in context.instructions
    assert stored.telemetry["tokens"]["total"] == sum(
        v for k, v in stored.telemetry["tokens"].items() if k != "total"
    )
    assert stored.telemetry["latency_ms"]["assemble_ms"] >= 0


def test_a_second_turn_is_refused_with_409_while_the_first_is_responding(chat):
    branch = Branch.objects.get(pk=chat.active_branch_id)
    first = services.turn_accept(session=chat, branch=branch, content="first")
    messages_before = Message.objects.filter(conversation_id=branch.conversation_id).count()
    with pytest.raises(Conflict) as caught:
        services.turn_accept(session=chat, branch=branch, content="second")
    assert caught.value.status == 409
    assert caught.value.code == "turn_in_progress"
    assert caught.value.extra["retry_after_ms"] == 1000
    assert caught.value.extra["turn_id"] == first.pk
    # nothing stored
    assert UserTurn.objects.filter(branch=branch).count() == 1
    assert Branch.objects.get(pk=branch.pk).last_turn_seq == 1
    assert Message.objects.filter(conversation_id=branch.conversation_id).count() == messages_before


def test_the_next_turn_is_accepted_once_the_previous_is_finalized_and_sees_it_pending(chat):
    """SRD acceptance 1: turn N+1 right after N streamed has N in its pending turns."""
    first = send(chat, "The deploy key lives in ops/keys/deploy.pem")
    branch = Branch.objects.get(pk=chat.active_branch_id)
    second = services.turn_accept(session=chat, branch=branch, content="where is the key?")
    context = context_prepare(turn=second)
    assert context.pending_turn_ids == [first.pk]
    assert [m["role"] for m in context.pending] == ["user", "assistant"]
    assert context.pending[0]["rendered_text"] == "The deploy key lives in ops/keys/deploy.pem"
    assert context.pending[1]["rendered_text"] == first.final_assistant_message["rendered_text"]
    request = context.to_request_messages()
    assert [m["role"] for m in request] == ["user", "assistant", "user"]
    assert request[-1]["rendered_text"] == "where is the key?"


def test_commits_happen_strictly_in_branch_order(chat):
    first = send(chat, "one")
    second = send(chat, "two")
    assert summarize_turn(turn_id=second.pk) is None  # must wait for the first
    assert UserTurn.objects.get(pk=second.pk).state_after_id is None
    state1 = summarize_turn(turn_id=first.pk)
    state2 = summarize_turn(turn_id=second.pk)
    assert (state1.state_seq, state2.state_seq) == (1, 2)
    assert state2.parent_id == state1.pk
    branch = Branch.objects.get(pk=chat.active_branch_id)
    assert (branch.head_seq, branch.head_state_id) == (2, state2.pk)
    assert UserTurn.objects.get(pk=first.pk).state_after_id == state1.pk
    assert summarize_turn(turn_id=first.pk) is None  # never twice
    assert StateCheckpoint.objects.filter(branch=branch).count() == 3


def test_a_committed_turn_is_indexed_then_done(chat):
    turn = send(chat, "index me", commit=True)
    assert turn.phase == Phase.STATE_COMMITTED
    index_turn(turn_id=turn.pk)
    turn.refresh_from_db()
    assert (turn.phase, turn.index_status) == (Phase.DONE, "indexed")
    assert turn.telemetry["latency_ms"]["index_ms"] >= 0
    assert turn.telemetry["latency_ms"]["summarize_ms"] >= 0


def test_jobs_are_recorded_and_idempotent(chat):
    turn = send(chat, "queue me")
    [job] = TurnJob.objects.filter(turn=turn, job_type=JobType.SUMMARIZE_TURN)
    assert job.state == "pending"
    assert job_run(job.pk) == "done"
    assert job_run(job.pk) is None  # already done: not claimed again
    turn.refresh_from_db()
    assert turn.phase == Phase.STATE_COMMITTED
    [index_job] = TurnJob.objects.filter(turn=turn, job_type=JobType.INDEX_TURN)
    assert job_run(index_job.pk) == "done"
    turn.refresh_from_db()
    assert turn.phase == Phase.DONE
    assert StateCheckpoint.objects.filter(source_turn=turn).count() == 1


def test_the_reconciler_commits_a_finalized_turn_left_uncommitted(
    chat, settings, django_capture_on_commit_callbacks
):
    """SRD acceptance 3: killed after finalization, before the commit."""
    turn = send(chat, "decided: we use PostgreSQL 16 for the ledger")
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "sync": True}
    with django_capture_on_commit_callbacks(execute=True):
        counts = reconcile()
    assert counts["summaries_queued"] == 1
    turn.refresh_from_db()
    assert turn.phase == Phase.DONE
    assert turn.state_after.state_seq == 1
    assert "PostgreSQL 16" in turn.state_after.summary
    again = reconcile()
    assert again["summaries_queued"] == 0 and again["indexing_queued"] == 0
    assert StateCheckpoint.objects.filter(branch_id=turn.branch_id).count() == 2


def test_every_message_of_a_turn_is_mirrored_into_the_branch_conversation(chat):
    turn = send(chat, "Find `parse_config` in lib/config.py")
    branch = Branch.objects.get(pk=chat.active_branch_id)
    rows = list(
        Message.objects.filter(conversation_id=branch.conversation_id)
        .order_by("seq")
        .values_list("seq", "role", "external_id")
    )
    assert rows == [
        (1, "user", f"turn:{turn.pk}:user"),
        (2, "assistant", f"turn:{turn.pk}:step0:assistant"),
    ]
    assert MessagePart.objects.filter(message__conversation_id=branch.conversation_id).count() == 2
    assert UserTurn.objects.get(pk=turn.pk).mirrored == "answer"
    # mirroring again (the reconciler) appends nothing
    from turns.mirror import mirror_turn

    assert mirror_turn(UserTurn.objects.get(pk=turn.pk)) == 0
    assert Message.objects.filter(conversation_id=branch.conversation_id).count() == 2


def test_grep_finds_a_turn_and_the_explorer_shows_its_conversation(chat, user, client):
    send(chat, "The quokka migration script is tools/quokka_migrate.py")
    branch = Branch.objects.get(pk=chat.active_branch_id)
    hits = grep_for_user(user=user, request=GrepRequest(query="quokka"))
    assert {h["conversation_id"] for h in hits} == {branch.conversation_id}
    client.force_login(user)
    page = client.get(f"/conversations/{branch.conversation_id}/")
    assert page.status_code == 200
    assert "quokka" in page.content.decode()


def test_a_failed_turn_keeps_no_answer_and_does_not_block_the_branch(chat):
    branch = Branch.objects.get(pk=chat.active_branch_id)
    turn = services.turn_accept(session=chat, branch=branch, content="doomed")
    turn_fail(turn=turn, code="provider_down", message="no answer")
    turn.refresh_from_db()
    assert turn.phase == Phase.FAILED and turn.error["code"] == "provider_down"
    nxt = send(chat, "next one")
    assert nxt.phase == Phase.RESPONSE_FINALIZED
    assert commit_pending(branch=branch)[0].source_turn_id == nxt.pk


def test_a_tool_loop_is_mirrored_with_typed_tool_parts(chat):
    from providers import blocks as B
    from providers.base import ProviderResponse

    branch = Branch.objects.get(pk=chat.active_branch_id)
    turn = services.turn_accept(session=chat, branch=branch, content="grep for quokka")
    context_prepare(turn=turn)

    def response(blocks, status):
        return ProviderResponse(
            raw_request={},
            raw_response={"stub": True},
            blocks=blocks,
            items=B.items_from_blocks(blocks),
            outcome={"status": status, "reason": None, "code": None, "message": None},
            usage={"input_tokens": 10, "output_tokens": 5},
            model="offline",
        )

    call = B.tool_use("call_1", "lcm_grep", {"query": "quokka"})
    first = services.step_start(
        turn=turn, request_json={"n": 0}, provider="offline", model_id="offline"
    )
    services.step_finish(
        step=first,
        response=response([B.text("Searching."), call], "paused"),
        tool_results=[B.tool_result("call_1", "3 hits in notes/quokka.md")],
    )
    second = services.step_start(
        turn=turn, request_json={"n": 1}, provider="offline", model_id="offline"
    )
    services.response_finalize(
        turn=turn, step=second, response=response([B.text("Found 3.")], "completed")
    )
    rows = list(
        Message.objects.filter(conversation_id=branch.conversation_id)
        .order_by("seq")
        .values_list("role", "external_id")
    )
    assert rows == [
        ("user", f"turn:{turn.pk}:user"),
        ("assistant", f"turn:{turn.pk}:step0:assistant"),
        ("tool", f"turn:{turn.pk}:step0:tool_results"),
        ("assistant", f"turn:{turn.pk}:step1:assistant"),
    ]
    call_part = MessagePart.objects.get(
        message__external_id=f"turn:{turn.pk}:step0:assistant", part_type="tool"
    )
    assert (call_part.tool_call_id, call_part.tool_name, call_part.tool_input) == (
        "call_1",
        "lcm_grep",
        {"query": "quokka"},
    )
    result_part = MessagePart.objects.get(message__external_id=f"turn:{turn.pk}:step0:tool_results")
    assert (result_part.tool_call_id, result_part.tool_output) == (
        "call_1",
        "3 hits in notes/quokka.md",
    )
