"""The effective budget follows the model's window (issue 35): with a 16k-token model and
the default 128k conversation budget, compaction works against what the window leaves, so
the start of the context stays put for many turns instead of sliding every turn, and no
request exceeds the window. Through the turn engine, the `anthropic` SDK and the local fake
Messages API; compaction jobs run as the product schedules them."""

from __future__ import annotations

import json

import pytest

from compaction.models import CompactionJob, JobState
from compaction.services import job_run
from core.token_estimate import estimate
from tests.factories import UserFactory
from tests.support.fake_messages_api import anthropic_text_stream
from turns import runner, services
from turns.models import Phase

WINDOW = 16_000
TURNS = 36


@pytest.fixture(autouse=True)
def _small_model(settings, monkeypatch):
    settings.LCM_LIBRARIAN_MODEL = "offline"
    settings.LCM_SUMMARY_PROVIDER_MODEL = "offline"  # the fake answers turns only
    monkeypatch.setenv("LCM_MODEL_SONNET_CONTEXT_LIMIT", str(WINDOW))


@pytest.fixture
def upstream(cached_anthropic):
    runner._shutting_down.clear()
    return cached_anthropic


def _start(body: dict) -> str:
    """The request's start: system text and the first two history messages, without marks."""
    system = body.get("system")
    texts = [b["text"] for b in system] if isinstance(system, list) else [system or ""]
    head = [
        [{k: v for k, v in b.items() if k != "cache_control"} for b in m["content"]]
        for m in body["messages"][:2]
    ]
    return json.dumps([texts, head], sort_keys=True)


def _tokens(body: dict) -> int:
    return estimate(json.dumps([body.get("system"), body["messages"], body.get("tools")]))


@pytest.mark.django_db(transaction=True)
def test_a_16k_window_keeps_the_context_start_for_many_turns(upstream):
    chat = services.session_create(
        owner=UserFactory(username="small"), title="chat", context_strategy="lcm"
    )
    for i in range(TURNS):
        upstream.enqueue(
            anthropic_text_stream(f"Answer {i}: " + " ".join(f"fact{i}x{k}" for k in range(100)))
        )
        chat.refresh_from_db()
        turn = services.turn_accept(
            session=chat,
            branch=chat.active_branch,
            content=f"Question {i}: " + " ".join(f"topic{i}y{k}" for k in range(80)),
            model="sonnet",
        )
        assert runner.run_turn(turn_id=turn.id).phase == Phase.RESPONSE_FINALIZED
        for job_id in CompactionJob.objects.filter(state=JobState.PENDING).values_list(
            "pk", flat=True
        ):
            job_run(job_id=job_id)
    bodies = [r.body for r in upstream.requests]
    assert len(bodies) == TURNS
    for body in bodies:  # within the window, with room for the answer
        assert _tokens(body) + body["max_tokens"] <= WINDOW
    starts = [_start(body) for body in bodies]
    kept = sum(a == b for a, b in zip(starts, starts[1:], strict=False))
    # the start moves only when compaction runs (a few times), not every turn
    assert kept >= (TURNS - 1) * 2 // 3, (kept, TURNS - 1)
    assert CompactionJob.objects.filter(state=JobState.SUCCEEDED).exists()
