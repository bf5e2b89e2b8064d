"""The prompt cache as users run the product (issue 46): memory retrieval on, the workers
behind. Through the turn engine, the official `anthropic` SDK and the local fake Messages
API that replays the provider's cache rule; background jobs run only where a test runs them
(no worker here), which is what a busy worker looks like to a turn."""

from __future__ import annotations

import json

import pytest

from compaction.models import CompactionJob, JobState
from memory.indexing import index_turn
from tests.factories import UserFactory
from tests.support.fake_messages_api import anthropic_text_stream
from turns import runner, services
from turns.branches import branch_fork
from turns.jobs import commit_pending, summarize_turn
from turns.models import Branch, Phase, UserTurn

FACT = "Note for later: the automobile is stored in the green crate beside the boiler."
QUESTION = "Which green crate beside the boiler?"
# About 1,500 tokens of instructions: above the 1,024-token minimum cacheable prefix.
LONG_PROMPT = "You are the house assistant. " + " ".join(
    f"Rule {i}: answer about crates, rooms and vehicles with exact places." for i in range(120)
)


@pytest.fixture(autouse=True)
def _fake_answers_turns_only(settings):
    settings.LCM_LIBRARIAN_MODEL = "offline"
    settings.LCM_SUMMARY_PROVIDER_MODEL = "offline"


@pytest.fixture
def upstream(cached_anthropic):
    runner._shutting_down.clear()
    return cached_anthropic


def _turn(session, text: str, *, branch: Branch | None = None) -> UserTurn:
    session.refresh_from_db()
    branch = branch or Branch.objects.get(pk=session.active_branch_id)
    turn = services.turn_accept(session=session, branch=branch, content=text, model="sonnet")
    turn = runner.run_turn(turn_id=turn.id)
    assert turn.phase == Phase.RESPONSE_FINALIZED, turn.error
    return turn


def _unmarked(message: dict) -> str:
    content = message["content"]
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    blocks = [{k: v for k, v in b.items() if k != "cache_control"} for b in content]
    return json.dumps({"role": message["role"], "content": blocks}, sort_keys=True)


def _retrieved_from(turn: UserTurn, source: UserTurn) -> list[str]:
    turn.refresh_from_db()
    return [
        item["id"]
        for item in turn.context["retrieved"]
        if (item.get("provenance") or {}).get("source_turn_id") == source.pk
    ]


@pytest.mark.django_db(transaction=True)
def test_a_retrieved_item_already_in_the_context_is_not_retrieved_again(upstream, settings):
    upstream.enqueue(*(anthropic_text_stream(f"Answer {i}: noted.") for i in range(3)))
    chat = services.session_create(owner=UserFactory(username="held"), title="chat")
    first = _turn(chat, FACT)
    commit_pending(branch=chat.active_branch)
    assert index_turn(turn_id=first.pk).chunks_created >= 1

    # The fold keeps the first turn verbatim in the context: its memory is not sent again.
    asked = _turn(chat, QUESTION)
    assert _retrieved_from(asked, first) == []
    assert asked.context["budget"]["retrieval"]["in_context"] >= 1
    commit_pending(branch=chat.active_branch)

    # Sending the head state only (no verbatim turns), the same memory is retrieved.
    settings.LCM_STATE_FOLD_TOKENS = 0
    again = _turn(chat, QUESTION)
    assert _retrieved_from(again, first)


@pytest.mark.django_db(transaction=True)
def test_a_retrieved_block_is_byte_identical_in_the_next_requests_history(upstream):
    upstream.enqueue(*(anthropic_text_stream(f"Answer {i}: noted.") for i in range(4)))
    chat = services.session_create(
        owner=UserFactory(username="kept"),
        title="chat",
        context_strategy="lcm",
        system_prompt=LONG_PROMPT,
    )
    first = _turn(chat, FACT)
    commit_pending(branch=chat.active_branch)
    index_turn(turn_id=first.pk)
    # A fork's own history does not hold the parent's turn; its retrieval finds it.
    fork = branch_fork(branch=Branch.objects.get(pk=chat.active_branch_id), turn_id=first.pk)
    asked = _turn(chat, QUESTION, branch=fork)
    assert _retrieved_from(asked, first)
    _turn(chat, "And the bicycle?", branch=fork)

    sent, next_request = upstream.requests[-2].body, upstream.requests[-1].body
    current = sent["messages"][-1]
    assert "Retrieved memory" in json.dumps(current["content"])
    # The user's text first, the retrieved block after it, and the last breakpoint on it.
    assert current["content"][-1]["text"].startswith("Retrieved memory")
    assert "cache_control" in current["content"][-1]
    history = [_unmarked(m) for m in next_request["messages"]]
    assert _unmarked(current) in history
    # So the next request reads it from the cache instead of sending it again.
    assert upstream.cache_reports[-1]["cache_read_input_tokens"] > 0


def _state_fold_run(chat, turns: int, lag: int, upstream) -> list[UserTurn]:
    """`turns` turns of about 450 tokens; after each, only the turns `lag` or more behind
    are committed (the state commits lag behind the answers, as behind a busy worker)."""
    done = []
    for i in range(turns):
        upstream.enqueue(anthropic_text_stream(f"Answer {i}: " + "noted, kept. " * 100))
        facts = " ".join(f"module_{i}_{k}.py keeps ledger_{k}" for k in range(25))
        done.append(_turn(chat, f"Question {i}: where does {facts}?"))
        for behind in done[: max(0, len(done) - lag)]:
            behind.refresh_from_db()
            if behind.state_after_id is None:
                summarize_turn(turn_id=behind.pk)
    return list(UserTurn.objects.filter(session=chat).order_by("turn_seq"))


@pytest.mark.django_db(transaction=True)
def test_state_does_not_fold_on_consecutive_turns_while_commits_lag(upstream, settings):
    settings.LCM_STATE_FOLD_TOKENS = 2_000  # about four turns
    chat = services.session_create(owner=UserFactory(username="lagging"), title="chat")
    stored = _state_fold_run(chat, 16, lag=6, upstream=upstream)
    folded = [bool(t.context["budget"].get("state_folded")) for t in stored]
    assert any(folded[1:]), folded  # it does fold, once enough turns are committed
    pairs = [n for n in range(1, len(folded)) if folded[n] and folded[n - 1]]
    assert pairs == [], f"folded on consecutive turns {pairs}: {folded}"


@pytest.mark.django_db(transaction=True)
def test_compaction_completes_before_the_walk_drops_an_exchange(upstream, monkeypatch):
    monkeypatch.setenv("LCM_MODEL_SONNET_CONTEXT_LIMIT", "12000")
    chat = services.session_create(
        owner=UserFactory(username="behind"), title="chat", context_strategy="lcm"
    )
    for i in range(26):
        upstream.enqueue(
            anthropic_text_stream(f"Answer {i}: " + " ".join(f"fact{i}x{k}" for k in range(100)))
        )
        _turn(chat, f"Question {i}: " + " ".join(f"where is item{i}x{k}" for k in range(40)))
    # No worker ran a job: every compaction was run by the turn that needed it.
    assert CompactionJob.objects.filter(state=JobState.SUCCEEDED).exists()
    for request in upstream.requests:
        body = request.body
        system = json.dumps(body.get("system"))
        first_question = "Question 0:" in json.dumps(body["messages"])
        assert first_question or "Summaries of earlier conversation" in system, (
            "the walk dropped the oldest exchange before any summary stood for it"
        )


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("strategy", "compacted"), [("state", False), ("lcm", True)])
def test_a_state_sessions_mirror_is_not_compacted_on_append(strategy, compacted, settings):
    """The `state` strategy never sends its conversation's summaries: appending to its
    mirror queues no automatic compaction (an `lcm` session's does)."""
    from compaction.services import schedule_after_append
    from conversations.models import Conversation
    from tests.turns.conftest import send

    settings.LCM_SUMMARY_PROVIDER_MODEL = "offline"
    chat = services.session_create(
        owner=UserFactory(username=f"mirror-{strategy}"), title="chat", context_strategy=strategy
    )
    for i in range(4):
        send(chat, f"Question {i}: " + "where is the ledger kept? " * 20)
    conversation_id = Branch.objects.get(pk=chat.active_branch_id).conversation_id
    Conversation.objects.filter(pk=conversation_id).update(token_budget=200)
    CompactionJob.objects.filter(conversation_id=conversation_id).delete()
    schedule_after_append(conversation_id)
    assert CompactionJob.objects.filter(conversation_id=conversation_id).exists() is compacted
