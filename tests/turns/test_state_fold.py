"""`context_strategy: state` is cache-friendly (issue 35): the state sent advances only at
a fold, the turns after it go verbatim, so consecutive requests share the system text, the
folded state and the growing turns as a prefix. Through the turn engine, the official
`anthropic` SDK and the local fake Messages API that replays the provider's cache rule;
the state is committed after every turn, as the product does."""

from __future__ import annotations

import json

import pytest

from providers.caching import block_tokens
from tests.factories import UserFactory
from tests.support.fake_messages_api import anthropic_text_stream
from tests.turns.conftest import send
from turns import runner, services
from turns.branches import branch_fork
from turns.context import assemble
from turns.jobs import commit_pending
from turns.models import Branch, Phase, StateCheckpoint, UserTurn

TURNS = 14
WINDOW = 12_000  # input room 6,500: the window leaves less than the fold setting
FOLD_SETTING = 5_000


@pytest.fixture(autouse=True)
def _small_model(settings, monkeypatch):
    settings.LCM_LIBRARIAN_MODEL = "offline"  # the fake answers turns only
    settings.LCM_STATE_FOLD_TOKENS = FOLD_SETTING
    # The retrieval budget as before issue 46 (a quarter of the input room), which these
    # figures were chosen with: no memory is retrieved here, but the room it leaves counts.
    settings.LCM_RETRIEVAL_WINDOW_SHARE = 0.15
    monkeypatch.setenv("LCM_MODEL_SONNET_CONTEXT_LIMIT", str(WINDOW))


@pytest.fixture
def upstream(cached_anthropic):
    runner._shutting_down.clear()
    return cached_anthropic


def _unmarked(blocks) -> list[dict]:
    if isinstance(blocks, str):
        blocks = [{"type": "text", "text": blocks}]
    return [{k: v for k, v in b.items() if k != "cache_control"} for b in blocks]


def _system(body: dict) -> list[dict]:
    return _unmarked(body.get("system") or [])


def _messages(body: dict) -> list[str]:
    return [
        json.dumps({"role": m["role"], "content": _unmarked(m["content"])}, sort_keys=True)
        for m in body["messages"]
    ]


def _run(chat, turns: int) -> list[UserTurn]:
    """`turns` turns of about 450 tokens, the state committed after each."""
    for i in range(turns):
        facts = " ".join(f"module_{i}_{k}.py keeps ledger_{k}" for k in range(25))
        chat.refresh_from_db()
        turn = services.turn_accept(
            session=chat,
            branch=chat.active_branch,
            content=f"Question {i}: where does {facts}? \n",  # typed with a trailing blank
            model="sonnet",
        )
        assert runner.run_turn(turn_id=turn.id).phase == Phase.RESPONSE_FINALIZED
        commit_pending(branch=chat.active_branch)
    return list(UserTurn.objects.filter(session=chat).order_by("turn_seq"))


@pytest.mark.django_db(transaction=True)
def test_state_requests_share_a_growing_prefix_and_fold_at_the_budget(upstream):
    chat = services.session_create(owner=UserFactory(username="stateful"), title="chat")
    for i in range(TURNS):
        upstream.enqueue(anthropic_text_stream(f"Answer {i}: " + "noted, kept. " * 150))
    stored = _run(chat, TURNS)
    bodies = [r.body for r in upstream.requests]
    reports = upstream.cache_reports
    assert len(bodies) == TURNS
    folds = [t.context["budget"] for t in stored]
    budget = folds[-1]["state_fold_budget"]
    # the window, not the setting, bounds the verbatim turns here
    assert 0 < budget < FOLD_SETTING
    assert sum(f["state_folded"] for f in folds[1:]) >= 2, "no fold in the session"
    for turn, fold in zip(stored, folds, strict=True):
        # the verbatim turns stay within the fold budget, the request within the window
        sections = turn.context["sections_tokens"]
        assert sections["history"] + sections["pending"] <= fold["state_fold_budget"]
        assert sum(sections.values()) <= fold["input_limit"]
    steps = zip(bodies, bodies[1:], folds[1:], reports, reports[1:], strict=False)
    for before, after, fold, earlier, report in steps:
        if fold["state_folded"]:
            # the state sent advanced to the head: no turn it covers is sent again
            assert len(after["messages"]) == 1 and len(_system(after)) == 2
            continue
        # not folded: the same system text and state, the earlier turns unchanged in front,
        # and everything the previous request cached is read
        assert _system(after) == _system(before)
        # (the current message too: it is sent with the bytes it has in later requests)
        assert _messages(after)[: len(before["messages"])] == _messages(before)
        assert report["cache_read_input_tokens"] == (
            earlier["cache_read_input_tokens"] + earlier["cache_creation_input_tokens"]
        )
        if len(_system(after)) == 2:  # a folded state: the system and state are read
            system = sum(block_tokens(b) for b in _system(after))
            assert report["cache_read_input_tokens"] >= system
    state_parts = [_system(b)[-1]["text"] for b in bodies if len(_system(b)) == 2]
    assert state_parts and all(p.startswith('<memory_artifact kind="state"') for p in state_parts)
    steady = reports[TURNS // 3 :]
    read = sum(r["cache_read_input_tokens"] for r in steady)
    assert read / sum(sum(r.values()) for r in steady) >= 0.5


@pytest.mark.django_db(transaction=True)
def test_without_a_fold_budget_the_newest_state_goes_every_turn(upstream, settings):
    settings.LCM_STATE_FOLD_TOKENS = 0
    chat = services.session_create(owner=UserFactory(username="folding"), title="chat")
    for i in range(3):
        upstream.enqueue(anthropic_text_stream(f"Answer {i}."))
    stored = _run(chat, 3)
    assert [t.context["budget"]["state_folded"] for t in stored] == [True] * 3
    last = upstream.requests[-1].body
    assert len(last["messages"]) == 1 and "Question 1" in _system(last)[-1]["text"]


def test_a_fork_starts_from_its_base_state_and_keeps_its_own_turns_verbatim(chat, settings):
    settings.LCM_STATE_FOLD_TOKENS = 4000
    main = Branch.objects.get(pk=chat.active_branch_id)
    send(chat, "The ledger lives in billing/ledger.py", commit=True)
    send(chat, "Invoices are computed in billing/invoices.py", commit=True)
    main.refresh_from_db()
    fork = branch_fork(branch=main)
    first = send(chat, "On the fork: rename the ledger", branch=fork, commit=True)
    turn = services.turn_accept(session=chat, branch=fork, content="and now?")
    ctx = assemble(turn)
    # the fork's base state (the parent's head) is sent, then the fork's own turn verbatim
    assert first.context["budget"]["state_folded"] is True
    assert ctx.budget["state_sent_id"] == fork.base_state_id
    assert ctx.state_summary == StateCheckpoint.objects.get(pk=fork.base_state_id).summary
    assert "billing/invoices.py" in ctx.system_parts[-1]
    assert len(ctx.history) == 2  # the parent's turns are in the base state, not repeated
    assert ctx.history[0]["rendered_text"] == "On the fork: rename the ledger"


def test_a_turn_without_a_recorded_fold_sends_the_head_state(chat):
    send(chat, "The ledger lives in billing/ledger.py", commit=True)
    last = send(chat, "Invoices are computed in billing/invoices.py", commit=True)
    # a turn run before folds existed: its context records none
    budget = {k: v for k, v in last.context["budget"].items() if not k.startswith("state_")}
    UserTurn.objects.filter(pk=last.pk).update(context={**last.context, "budget": budget})
    branch = Branch.objects.get(pk=chat.active_branch_id)
    ctx = assemble(services.turn_accept(session=chat, branch=branch, content="where?"))
    assert ctx.budget["state_folded"] is True and ctx.budget["state_fold_seq"] == last.turn_seq
    assert ctx.budget["state_sent_id"] == branch.head_state_id
    assert ctx.history == [] and ctx.pending == []
