"""The librarian contract (SRD 10): pinned facts verbatim and never lost, artifacts and
decisions kept, the target size held; the model librarian checked entity by entity, retried
once naming what it missed, then replaced by the deterministic fallback."""

from __future__ import annotations

import pytest

from core.token_estimate import estimate
from tests.support.fake_messages_api import message
from tests.turns.conftest import send
from turns.branches import pin_add, pin_remove, state_commit
from turns.jobs import commit_pending, summarize_turn
from turns.librarian import (
    ARTIFACTS,
    DECISIONS,
    librarian_for_turn,
    parse_summary,
    shrink_summary,
)
from turns.models import Branch, StateCheckpoint, UserTurn


def _head(chat) -> StateCheckpoint:
    return StateCheckpoint.objects.get(
        pk=Branch.objects.get(pk=chat.active_branch_id).head_state_id
    )


def test_the_deterministic_librarian_keeps_artifacts_and_decisions(chat):
    send(
        chat,
        "We decided to use PostgreSQL instead of MySQL. The entry point is src/app/main.py "
        "and `load_settings()` reads config/base.toml. You must never log API keys.",
        commit=True,
    )
    state = _head(chat)
    parsed = parse_summary(state.summary)
    assert {"src/app/main.py", "config/base.toml"} <= set(parsed.artifacts)
    assert any("PostgreSQL instead of MySQL" in d for d in parsed.decisions)
    assert any("must never log API keys" in d for d in parsed.decisions)
    assert state.summary.startswith(DECISIONS) and ARTIFACTS in state.summary
    assert state.librarian["writer"] == "deterministic"
    assert state.librarian["validation"] == "pass"


def test_the_summary_stays_within_the_target(chat, settings):
    settings.LCM_STATE_TARGET_TOKENS = 300
    for i in range(25):
        send(
            chat,
            f"Step {i}: we decided to rename module pkg/mod_{i}/handler_{i}.py and keep "
            f"`Handler{i}.run()`; it must stay backwards compatible with release v{i}.0.",
        )
    commit_pending(branch=Branch.objects.get(pk=chat.active_branch_id))
    states = StateCheckpoint.objects.filter(branch_id=chat.active_branch_id, state_seq__gt=0)
    assert states.count() == 25
    assert max(estimate(s.summary) for s in states) <= 300
    latest = parse_summary(_head(chat).summary)
    assert "pkg/mod_24/handler_24.py" in latest.artifacts  # newest kept first


def test_pins_are_kept_verbatim_on_every_state(chat):
    branch = Branch.objects.get(pk=chat.active_branch_id)
    _, pin = pin_add(branch=branch, text="Deadline: ship v2 before 2026-12-01 — no exceptions!")
    for i in range(5):
        send(chat, f"turn {i}", commit=True)
    states = StateCheckpoint.objects.filter(branch=branch, state_seq__gte=1)
    assert states.count() == 6
    assert all(s.pinned_facts == [pin] for s in states)


def test_a_pin_added_while_the_librarian_runs_is_not_lost(chat):
    turn = send(chat, "a long exchange")
    branch = Branch.objects.get(pk=chat.active_branch_id)
    head = _head(chat)
    planned = librarian_for_turn(turn=turn, head=head)  # the librarian reads the old head
    _, pin = pin_add(branch=branch, text="added meanwhile")  # head moves (seq 1)
    state = state_commit(
        turn=turn, summary=planned.summary, librarian=planned.info, base_summary=head.summary
    )
    assert state is not None and state.state_seq == 2
    assert state.pinned_facts == [pin]
    assert Branch.objects.get(pk=branch.pk).head_state_id == state.pk


def test_an_unpinned_fact_leaves_later_states_but_stays_in_history(chat):
    branch = Branch.objects.get(pk=chat.active_branch_id)
    pinned_state, pin = pin_add(branch=branch, text="temporary")
    unpinned = pin_remove(branch=branch, pin_id=pin["id"])
    assert unpinned.pinned_facts == [] and unpinned.reason == "unpin"
    assert StateCheckpoint.objects.get(pk=pinned_state.pk).pinned_facts == [pin]


def test_shrink_summary_keeps_decisions_and_artifacts_first():
    summary = "\n".join(
        [DECISIONS, "- We decided to keep the ledger in PostgreSQL."]
        + [ARTIFACTS, "- `src/ledger/store.py`"]
        + ["## Recent exchanges"]
        + [f"- Turn {i} — user: {'blah ' * 40}" for i in range(10)]
    )
    small = shrink_summary(summary, target_tokens=60)
    assert estimate(small) <= 60
    assert "ledger in PostgreSQL" in small and "src/ledger/store.py" in small


def _model_librarian(monkeypatch, settings, api):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-librarian")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", api.base_url)
    settings.LCM_LIBRARIAN_MODEL = "haiku"


def _prompt_text(request) -> str:
    content = request.body["messages"][0]["content"]
    return content if isinstance(content, str) else content[0]["text"]


def _finalized_turn(chat) -> UserTurn:
    return send(chat, "We decided to move the cache to redis/cache_v2.py and call `warm_cache()`.")


def test_the_model_librarian_writes_the_state_when_it_keeps_every_entity(
    chat, monkeypatch, settings, fake_messages_api
):
    turn = _finalized_turn(chat)
    _model_librarian(monkeypatch, settings, fake_messages_api)
    good = (
        f"{DECISIONS}\n- We decided to move the cache to redis/cache_v2.py and call warm_cache().\n"
        f"{ARTIFACTS}\n- `redis/cache_v2.py`\n- `warm_cache()`"
    )
    fake_messages_api.enqueue(message(good))
    state = summarize_turn(turn_id=turn.pk)
    assert state.summary == good
    assert state.librarian["writer"] == "model"
    assert (state.librarian["validation"], state.librarian["retries"]) == ("pass", 0)
    assert "redis/cache_v2.py" in _prompt_text(fake_messages_api.requests[0])


def test_the_model_librarian_is_retried_once_naming_the_missing_entities(
    chat, monkeypatch, settings, fake_messages_api
):
    turn = _finalized_turn(chat)
    _model_librarian(monkeypatch, settings, fake_messages_api)
    fixed = (
        f"{DECISIONS}\n- We decided to move the cache to redis/cache_v2.py, then warm_cache().\n"
        f"{ARTIFACTS}\n- redis/cache_v2.py, warm_cache()"
    )
    fake_messages_api.enqueue(message("The cache moved."), message(fixed))
    state = summarize_turn(turn_id=turn.pk)
    assert state.summary == fixed
    assert (state.librarian["writer"], state.librarian["retries"]) == ("model", 1)
    retry_prompt = _prompt_text(fake_messages_api.requests[1])
    assert "missed these" in retry_prompt and "redis/cache_v2.py" in retry_prompt


def test_the_deterministic_fallback_writes_the_state_after_two_misses(
    chat, monkeypatch, settings, fake_messages_api
):
    turn = _finalized_turn(chat)
    _model_librarian(monkeypatch, settings, fake_messages_api)
    fake_messages_api.enqueue(message("Nothing useful."), message("Still nothing."))
    state = summarize_turn(turn_id=turn.pk)
    assert len(fake_messages_api.requests) == 2
    assert state.librarian["writer"] == "deterministic"
    assert state.librarian["fallback"] is True and state.librarian["validation"] == "fail"
    assert "redis/cache_v2.py" in state.summary
    assert "redis/cache_v2.py" in state.librarian["missing"]


@pytest.mark.parametrize("failure", ["auth", "server"])
def test_a_failing_model_falls_back_without_blocking_the_commit(
    chat, monkeypatch, settings, fake_messages_api, failure
):
    from tests.support.fake_messages_api import authentication_error, server_error

    turn = _finalized_turn(chat)
    _model_librarian(monkeypatch, settings, fake_messages_api)
    fake_messages_api.enqueue(
        *([authentication_error()] if failure == "auth" else [server_error()] * 3)
    )
    state = summarize_turn(turn_id=turn.pk)
    assert state is not None and state.librarian["fallback"] is True
    assert "redis/cache_v2.py" in state.summary
