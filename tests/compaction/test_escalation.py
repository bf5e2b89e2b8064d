"""Escalation through the engine with the real AnthropicSummarizer (real SDK, real HTTP)
against the local fake Messages API: what each provider behaviour leaves in the store."""

from __future__ import annotations

import pytest
from django.utils import timezone

from compaction.engine import compact_conversation
from compaction.models import CircuitBreaker, CompactionRun
from compaction.summarizers import AnthropicSummarizer
from compaction.summarizers.analysis import FALLBACK_MARKER
from conversations.models import ContextItem, MessagePart, Summary
from core.token_estimate import estimate
from tests.factories import append_messages
from tests.support.fake_messages_api import (
    authentication_error,
    hang,
    message,
    overloaded,
    server_error,
    text_block,
    thinking_block,
)

GOOD = "Users debugged tests/test_cache.py timeouts after v1 deploys.\nExpand for details about: each failing case"


@pytest.fixture
def one_pass(settings):
    """Every raw message outside the tail fits one leaf pass; no condensed pass follows."""
    settings.LCM_LEAF_CHUNK_TOKENS = 100_000
    settings.LCM_LEAF_TARGET_TOKENS = 120
    settings.LCM_AUTOCOMPACT_DISABLED = True
    settings.LCM_SUMMARY_MIN_FIDELITY = 0  # the gate's own tests: test_fidelity_gate.py
    settings.LCM_SUMMARY_MIN_RELATIONS = 0
    return settings


@pytest.fixture
def sleeps():
    return []


@pytest.fixture
def model(fake_messages_api, sleeps):
    made = []

    def make(timeout: float = 5.0, max_retries: int = 3) -> AnthropicSummarizer:
        summarizer = AnthropicSummarizer(
            api_key="sk-test",
            base_url=fake_messages_api.base_url,
            model="claude-summary-test",
            timeout=timeout,
            max_retries=max_retries,
            sleep=sleeps.append,
        )
        made.append(summarizer)
        return summarizer

    yield make
    for summarizer in made:
        summarizer.close()


@pytest.fixture
def history(conversation, one_pass):
    append_messages(conversation, 30)
    return conversation


def snapshot(conversation):
    return (
        list(
            ContextItem.objects.filter(conversation=conversation)
            .order_by("ordinal")
            .values_list("ordinal", "message_id", "summary_id")
        ),
        MessagePart.objects.filter(message__conversation=conversation).count(),
    )


def test_the_normal_level_is_used_when_the_model_answers_well(history, fake_messages_api, model):
    fake_messages_api.enqueue(message(GOOD))

    result = compact_conversation(conversation_id=history.pk, summarizer=model())

    summary = Summary.objects.get(pk=result.summaries_created[0])
    assert (summary.level, summary.model, summary.content) == ("normal", "claude-fake-1", GOOD)
    assert len(fake_messages_api.requests) == 1
    assert result.levels == {"normal": 1}


def test_a_401_writes_nothing_and_is_reported(history, fake_messages_api, model, api):
    before = snapshot(history)
    fake_messages_api.enqueue(authentication_error())

    result = compact_conversation(conversation_id=history.pk, summarizer=model())

    assert result.status == "failed"
    assert result.error_code == "summarizer_auth"
    assert "401" in result.detail
    assert result.summaries_created == []
    assert not Summary.objects.exists()
    assert snapshot(history) == before
    assert len(fake_messages_api.requests) == 1
    assert CompactionRun.objects.get(pk=result.run_id).status == "failed"


def test_a_401_through_the_api_is_a_502_in_the_error_shape(
    history, fake_messages_api, api, monkeypatch, settings
):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-bad")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_messages_api.base_url)
    settings.LCM_SUMMARY_MAX_RETRIES = 0
    fake_messages_api.enqueue(authentication_error())

    response = api.post(
        f"/api/v1/conversations/{history.pk}/compact/", {"wait": True}, format="json"
    )

    assert response.status_code == 502
    assert response.json()["code"] == "summarizer_auth_failed"
    assert not Summary.objects.exists()


def test_an_overload_is_retried_then_the_normal_level_succeeds(
    history, fake_messages_api, model, sleeps
):
    fake_messages_api.enqueue(overloaded(), message(GOOD))

    result = compact_conversation(conversation_id=history.pk, summarizer=model())

    assert Summary.objects.get(pk=result.summaries_created[0]).level == "normal"
    assert len(fake_messages_api.requests) == 2
    assert len(sleeps) == 1


def test_output_longer_than_the_input_goes_to_the_aggressive_level(
    history, fake_messages_api, model
):
    rambling = "The user said many things. " * 600
    fake_messages_api.enqueue(message(rambling), message(GOOD))

    result = compact_conversation(conversation_id=history.pk, summarizer=model())

    summary = Summary.objects.get(pk=result.summaries_created[0])
    assert summary.level == "aggressive"
    assert summary.content == GOOD
    assert len(fake_messages_api.requests) == 2
    notes = CompactionRun.objects.get(pk=result.run_id).notes["notes"]
    assert "is not shorter than" in notes[0]


def test_empty_output_goes_to_the_next_level(history, fake_messages_api, model):
    fake_messages_api.enqueue(message(""), message(GOOD))

    result = compact_conversation(conversation_id=history.pk, summarizer=model())

    assert Summary.objects.get(pk=result.summaries_created[0]).level == "aggressive"


def test_hangs_time_out_each_model_level_and_the_fallback_is_marked(
    history, fake_messages_api, model
):
    fake_messages_api.enqueue(hang(30), hang(30))

    result = compact_conversation(
        conversation_id=history.pk, summarizer=model(timeout=0.3, max_retries=0)
    )

    summary = Summary.objects.get(pk=result.summaries_created[0])
    assert summary.level == "fallback"
    assert summary.model == "fallback"
    assert summary.content.startswith(FALLBACK_MARKER)
    assert summary.token_count <= 512
    assert summary.token_count <= summary.source_token_count // 2
    assert len(fake_messages_api.requests) == 2


def test_model_reasoning_never_reaches_a_summary(history, fake_messages_api, model):
    fake_messages_api.enqueue(
        message(
            content=[
                thinking_block("SECRET-CHAIN: first I will consider the cache"),
                text_block("<thinking>SECRET-INLINE musing</thinking>" + GOOD),
            ]
        )
    )

    result = compact_conversation(conversation_id=history.pk, summarizer=model())

    content = Summary.objects.get(pk=result.summaries_created[0]).content
    assert "SECRET" not in content
    assert content == GOOD


def test_the_spend_guard_falls_back_to_deterministic_and_says_so(
    history, fake_messages_api, model, settings
):
    settings.LCM_SUMMARY_MAX_CALLS = 0

    result = compact_conversation(conversation_id=history.pk, summarizer=model())

    summary = Summary.objects.get(pk=result.summaries_created[0])
    assert summary.model == "deterministic"
    assert fake_messages_api.requests == []
    notes = CompactionRun.objects.get(pk=result.run_id).notes["notes"]
    assert "spend guard: call limit reached" in notes[0]


def test_the_circuit_breaker_opens_after_repeated_failures(
    conversation, one_pass, fake_messages_api, model, settings
):
    settings.LCM_CIRCUIT_BREAKER_FAILURES = 2
    settings.LCM_LEAF_CHUNK_TOKENS = 300
    append_messages(conversation, 60)
    fake_messages_api.enqueue(server_error(500), server_error(500))

    result = compact_conversation(
        conversation_id=conversation.pk, mode="full", summarizer=model(max_retries=0)
    )

    summaries = list(
        Summary.objects.filter(pk__in=result.summaries_created).values_list("pk", "model")
    )
    by_id = dict(summaries)
    first, *rest = result.summaries_created
    assert by_id[first] == "fallback"
    assert rest and all(by_id[s] == "deterministic" for s in rest)
    assert len(fake_messages_api.requests) == 2
    breaker = CircuitBreaker.objects.get(provider="anthropic")
    assert breaker.opened_until > timezone.now()
    notes = " ".join(CompactionRun.objects.get(pk=result.run_id).notes["notes"])
    assert "circuit breaker open for anthropic" in notes
    assert estimate(Summary.objects.get(pk=first).content) <= 512
