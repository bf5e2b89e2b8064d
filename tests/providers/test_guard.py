"""The spend guard and circuit breaker, through the provider layer (DatabaseGuard)."""

from __future__ import annotations

import pytest

from compaction.guard import DatabaseGuard
from compaction.models import CircuitBreaker, SummarizerCall
from providers.config import model_get
from providers.errors import ProviderUnavailable
from providers.registry import provider_for
from tests.factories import ConversationFactory
from tests.providers.helpers import finished, make_request
from tests.support.fake_messages_api import anthropic_text_stream, overloaded

pytestmark = pytest.mark.django_db


@pytest.fixture
def conversation():
    return ConversationFactory()


def guarded_call(conversation, **kwargs):
    spec = model_get("sonnet")
    provider = provider_for(spec, guard=DatabaseGuard(), sleep=lambda s: None, **kwargs)
    request = make_request(spec, conversation_id=conversation.pk, purpose="librarian")
    return list(provider.stream(request))


def test_a_guarded_call_is_counted_against_the_conversation(anthropic_env, conversation):
    anthropic_env.enqueue(anthropic_text_stream("ok"))
    assert finished(guarded_call(conversation)).outcome["status"] == "completed"
    assert list(SummarizerCall.objects.values_list("conversation_id", "provider")) == [
        (conversation.pk, "anthropic")
    ]


def test_the_spend_guard_refuses_a_call_over_the_limit_without_sending_it(
    anthropic_env, conversation, settings
):
    settings.LCM_SUMMARY_MAX_CALLS = 1
    anthropic_env.enqueue(anthropic_text_stream("ok"), anthropic_text_stream("never"))
    guarded_call(conversation)
    with pytest.raises(ProviderUnavailable) as refused:
        guarded_call(conversation)
    assert refused.value.code == "spend_limit"
    assert len(anthropic_env.requests) == 1
    assert SummarizerCall.objects.count() == 1


def test_repeated_failures_open_the_breaker_and_then_nothing_is_sent(
    anthropic_env, conversation, settings
):
    settings.LCM_CIRCUIT_BREAKER_FAILURES = 2
    anthropic_env.enqueue(overloaded(), overloaded(), anthropic_text_stream("never"))
    for _ in range(2):
        with pytest.raises(ProviderUnavailable) as failed:
            guarded_call(conversation, max_retries=0)
        assert failed.value.code == "overloaded_error"
    with pytest.raises(ProviderUnavailable) as refused:
        guarded_call(conversation, max_retries=0)
    assert refused.value.code == "circuit_open"
    assert len(anthropic_env.requests) == 2
    assert CircuitBreaker.objects.get(provider="anthropic").opened_until is not None


def test_a_success_resets_the_failure_count(anthropic_env, conversation, settings):
    settings.LCM_CIRCUIT_BREAKER_FAILURES = 3
    anthropic_env.enqueue(overloaded(), anthropic_text_stream("ok"))
    with pytest.raises(ProviderUnavailable):
        guarded_call(conversation, max_retries=0)
    assert CircuitBreaker.objects.get(provider="anthropic").consecutive_failures == 1
    guarded_call(conversation, max_retries=0)
    assert CircuitBreaker.objects.get(provider="anthropic").consecutive_failures == 0
