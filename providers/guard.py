"""Call guards: the spend guard and circuit breaker, usable by every caller of the provider
layer.

An adapter takes an optional `guard` (anything with `check`, `record_call`, `success`,
`failure`). `NoGuard` is the default. `DatabaseGuard` is the product's guard: the same
`SummarizerCall` and `CircuitBreaker` tables compaction has always used (they stay in the
compaction app: moving models between apps would mean a migration for no gain), reached
through `compaction.guard`, imported lazily so that `providers` stays importable without
the ORM and does not depend on compaction at import time.

The compaction engine keeps calling `compaction.guard` itself (it substitutes the
deterministic summarizer rather than failing, see compaction/escalation.py), so its
summarizer adapter gets `NoGuard`; the turn engine, the librarian and other callers pass
`DatabaseGuard()` and get a `ProviderUnavailable` (code `circuit_open` or
`spend_limit`) instead of a call.
"""

from __future__ import annotations

from typing import Protocol

from providers.errors import ProviderUnavailable


class CallGuard(Protocol):
    def check(self, *, provider: str, conversation_id: int | None) -> None:
        """Raise ProviderUnavailable when the call must not be made."""

    def record_call(self, *, provider: str, conversation_id: int | None) -> None: ...

    def success(self, *, provider: str) -> None: ...

    def failure(self, *, provider: str, error: str) -> None: ...


class NoGuard:
    def check(self, *, provider: str, conversation_id: int | None) -> None:
        return None

    def record_call(self, *, provider: str, conversation_id: int | None) -> None:
        return None

    def success(self, *, provider: str) -> None:
        return None

    def failure(self, *, provider: str, error: str) -> None:
        return None


class DatabaseGuard:
    """Spend guard per conversation (LCM_SUMMARY_MAX_CALLS per window) and a breaker per
    provider (LCM_CIRCUIT_BREAKER_*), shared by every worker through the database."""

    def check(self, *, provider: str, conversation_id: int | None) -> None:
        from compaction import guard

        if guard.circuit_open(provider=provider):
            raise ProviderUnavailable(
                "circuit_open",
                f"the circuit breaker for {provider} is open after repeated failures",
                provider=provider,
            )
        if conversation_id is not None and not guard.spend_allowed(conversation_id=conversation_id):
            raise ProviderUnavailable(
                "spend_limit",
                "the spend guard's call limit for this conversation is reached "
                "(LCM_SUMMARY_MAX_CALLS per LCM_SUMMARY_CALL_WINDOW_SECONDS)",
                provider=provider,
            )

    def record_call(self, *, provider: str, conversation_id: int | None) -> None:
        from compaction import guard

        if conversation_id is not None:
            guard.spend_record(conversation_id=conversation_id, provider=provider)

    def success(self, *, provider: str) -> None:
        from compaction import guard

        guard.circuit_success(provider=provider)

    def failure(self, *, provider: str, error: str) -> None:
        from compaction import guard

        guard.circuit_failure(provider=provider, error=error)
