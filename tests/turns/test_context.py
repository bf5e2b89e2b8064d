"""Context assembly and the deterministic shrinker (SRD 5.9, 7; acceptance 4)."""

from __future__ import annotations

import pytest

from core.token_estimate import estimate
from tests.turns.conftest import send
from turns import services
from turns.branches import pin_add
from turns.context import assemble, context_prepare
from turns.errors import ContextTooLarge
from turns.models import Branch, Phase, UserTurn

LONG = (
    "We are migrating the billing service; the invoices module in billing/invoices.py "
    "computes totals and the tax tables live in billing/tax_tables.json. "
) * 6


@pytest.fixture
def tiny_model(tmp_path, monkeypatch):
    """An offline model with a 1,400-token window: 1,100 tokens for input."""
    config = tmp_path / "config.toml"
    config.write_text(
        "[budget]\nresponse_reserve_tokens = 200\nsafety_margin_tokens = 100\n"
        "max_retrieval_tokens = 200\n\n"
        '[models.tiny]\nprovider = "offline"\nmodel_id = "offline"\n'
        "context_limit = 1400\nmax_output_tokens = 200\n"
    )
    monkeypatch.setenv("LCM_CONFIG_FILE", str(config))
    return "tiny"


def test_the_context_has_every_section_in_order(chat, settings):
    settings.LCM_STATE_FOLD_TOKENS = 0  # the newest state every turn: no verbatim turns
    branch = Branch.objects.get(pk=chat.active_branch_id)
    pin_add(branch=branch, text="Always answer in English.")
    send(chat, "first exchange", commit=True)
    pending = send(chat, "second exchange")
    turn = services.turn_accept(session=chat, branch=branch, content="third")
    ctx = assemble(turn)
    system = ctx.system
    assert system.index("untrusted data") < system.index("Always answer in English.")
    # the state is a system part of its own after the instructions (a cache breakpoint),
    # then the pending turns as real messages, then the user's own text
    assert len(ctx.system_parts) == 2 and ctx.marked_parts == (0, 1)
    assert ctx.system_parts[1].startswith('<memory_artifact kind="state" untrusted="true">')
    assert "first exchange" in ctx.system_parts[1]
    messages = ctx.to_request_messages()
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[0]["blocks"] == [{"type": "text", "text": "second exchange", "annotations": []}]
    assert "memory_artifact" not in str(messages)
    assert messages[-1]["blocks"][-1]["text"] == "third"
    assert ctx.stable_messages == 3  # the current message too: its bytes repeat (issue 46)
    assert ctx.pending_turn_ids == [pending.pk]
    assert ctx.budget["model_limit"] == 32_768
    assert ctx.budget["input_limit"] == 32_768 - 4000 - 1500
    assert set(ctx.sections_tokens) == {
        "system",
        "pinned",
        "summaries",
        "history",
        "state",
        "pending",
        "retrieved",
        "user",
        "tools",
    }
    assert ctx.shrink_steps == []


def test_the_shrinker_drops_pending_oldest_first_then_shrinks_the_summary(
    user, settings, tiny_model
):
    settings.LCM_STATE_TARGET_TOKENS = 1050
    chat = services.session_create(owner=user, default_model=tiny_model)
    branch = Branch.objects.get(pk=chat.active_branch_id)
    for i in range(4):
        decisions = " ".join(
            f"We decided to use component_{i}_{j} for stage {j}." for j in range(12)
        )
        send(chat, f"Commit {i}: {decisions}", commit=True)
    head = Branch.objects.get(pk=branch.pk).head_state
    assert estimate(head.summary) > 900  # too big for 1,100 tokens with anything else
    pending = [send(chat, f"Pending {i}: {LONG}") for i in range(3)]
    turn = services.turn_accept(session=chat, branch=branch, content="What changed?")
    ctx = assemble(turn)
    kinds = [step.split()[0] for step in ctx.shrink_steps]
    assert kinds == ["drop_pending"] * 3 + ["shrink_summary"]
    assert [s.split()[1] for s in ctx.shrink_steps[:3]] == [f"turn={p.pk}" for p in pending]
    assert ctx.pending == [] and ctx.token_total() <= ctx.budget["input_limit"]
    # deterministic: the same input shrinks the same way
    again = assemble(turn)
    assert again.shrink_steps == ctx.shrink_steps
    assert again.state_summary == ctx.state_summary


def test_a_context_that_cannot_fit_fails_the_turn_naming_the_settings(user, tiny_model):
    chat = services.session_create(owner=user, default_model=tiny_model)
    branch = Branch.objects.get(pk=chat.active_branch_id)
    turn = services.turn_accept(session=chat, branch=branch, content="x " * 3000)
    with pytest.raises(ContextTooLarge) as caught:
        context_prepare(turn=turn)
    assert caught.value.status == 422
    assert "CONTEXT_LIMIT" in " ".join(caught.value.extra["settings"])
    assert caught.value.extra["input_limit"] == 1100
    stored = UserTurn.objects.get(pk=turn.pk)
    assert stored.phase == Phase.FAILED and stored.error["code"] == "context_too_large"
    assert stored.context is None


def test_the_lcm_strategy_sends_the_branch_history_as_real_messages(user):
    chat = services.session_create(owner=user, context_strategy="lcm")
    first = send(chat, "The octopus repository is at git.example.com/octo", commit=True)
    branch = Branch.objects.get(pk=chat.active_branch_id)
    turn = services.turn_accept(session=chat, branch=branch, content="where is the octopus repo?")
    ctx = assemble(turn)
    assert ctx.strategy == "lcm"
    assert ctx.state_summary == "" and ctx.summaries == []
    assert "octopus" not in ctx.system and "memory_artifact" not in ctx.system
    messages = ctx.to_request_messages()
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[0]["rendered_text"] == "The octopus repository is at git.example.com/octo"
    answer = first.final_assistant_message["rendered_text"]
    assert messages[1]["rendered_text"] == answer.strip()
    # the current message is sent once, last, and never as part of the history
    assert messages[2]["rendered_text"] == "where is the octopus repo?"
    assert ctx.stable_messages == 3  # the current message too: its bytes repeat (issue 46)
