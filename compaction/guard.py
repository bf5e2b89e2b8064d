"""Spend guard and circuit breaker for model summarizers, with their state in the database
so every worker process sees the same counts.

- Spend guard: at most `LCM_SUMMARY_MAX_CALLS` model calls per conversation per
  `LCM_SUMMARY_CALL_WINDOW_SECONDS` (a sliding window over `SummarizerCall` rows).
- Circuit breaker: after `LCM_CIRCUIT_BREAKER_FAILURES` consecutive provider failures the
  provider is skipped for `LCM_CIRCUIT_BREAKER_COOLDOWN_SECONDS`.

When either says no, the engine uses the deterministic summarizer and records why.
Each write here is its own tiny autocommit statement, never inside a compaction
transaction (the model call happens between them).
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db.models import F
from django.utils import timezone

from compaction.models import CircuitBreaker, SummarizerCall
from providers.errors import ProviderUnavailable


def spend_allowed(*, conversation_id: int) -> bool:
    limit = settings.LCM_SUMMARY_MAX_CALLS
    since = timezone.now() - timedelta(seconds=settings.LCM_SUMMARY_CALL_WINDOW_SECONDS)
    used = SummarizerCall.objects.filter(
        conversation_id=conversation_id, called_at__gte=since
    ).count()
    return used < limit


def spend_record(*, conversation_id: int, provider: str) -> None:
    SummarizerCall.objects.create(
        conversation_id=conversation_id, provider=provider, called_at=timezone.now()
    )


def circuit_open(*, provider: str) -> bool:
    opened_until = (
        CircuitBreaker.objects.filter(provider=provider)
        .values_list("opened_until", flat=True)
        .first()
    )
    return opened_until is not None and opened_until > timezone.now()


def circuit_failure(*, provider: str, error: str) -> None:
    """Count a failure; the call that reaches the threshold opens the breaker."""
    CircuitBreaker.objects.get_or_create(provider=provider)
    CircuitBreaker.objects.filter(provider=provider).update(
        consecutive_failures=F("consecutive_failures") + 1,
        last_error=error[:2000],
        updated_at=timezone.now(),
    )
    cooldown = timedelta(seconds=settings.LCM_CIRCUIT_BREAKER_COOLDOWN_SECONDS)
    CircuitBreaker.objects.filter(
        provider=provider,
        consecutive_failures__gte=settings.LCM_CIRCUIT_BREAKER_FAILURES,
    ).update(opened_until=timezone.now() + cooldown, consecutive_failures=0)


def circuit_success(*, provider: str) -> None:
    CircuitBreaker.objects.filter(provider=provider, consecutive_failures__gt=0).update(
        consecutive_failures=0, updated_at=timezone.now()
    )


class DatabaseGuard:
    """Spend guard per conversation (LCM_SUMMARY_MAX_CALLS per window) and a breaker per
    provider (LCM_CIRCUIT_BREAKER_*), shared by every worker through the database."""

    def check(self, *, provider: str, conversation_id: int | None) -> None:
        if circuit_open(provider=provider):
            raise ProviderUnavailable(
                "circuit_open",
                f"the circuit breaker for {provider} is open after repeated failures",
                provider=provider,
            )
        if conversation_id is not None and not spend_allowed(conversation_id=conversation_id):
            raise ProviderUnavailable(
                "spend_limit",
                "the spend guard's call limit for this conversation is reached "
                "(LCM_SUMMARY_MAX_CALLS per LCM_SUMMARY_CALL_WINDOW_SECONDS)",
                provider=provider,
            )

    def record_call(self, *, provider: str, conversation_id: int | None) -> None:
        if conversation_id is not None:
            spend_record(conversation_id=conversation_id, provider=provider)

    def success(self, *, provider: str) -> None:
        circuit_success(provider=provider)

    def failure(self, *, provider: str, error: str) -> None:
        circuit_failure(provider=provider, error=error)
