"""Call guards: the spend guard and circuit breaker, usable by every caller of the provider
layer.

An adapter takes an optional `guard` (anything with `check`, `record_call`, `success`,
`failure`). `NoGuard` is the default. The product's guard, `DatabaseGuard`, lives in
`compaction/guard.py` beside the `SummarizerCall` and `CircuitBreaker` tables it counts
in: the provider layer sits below every app and knows only this protocol.

The compaction engine keeps calling `compaction.guard` itself (it substitutes the
deterministic summarizer rather than failing, see compaction/escalation.py), so its
summarizer adapter gets `NoGuard`; the turn engine, the librarian and other callers pass
`DatabaseGuard()` and get a `ProviderUnavailable` (code `circuit_open` or
`spend_limit`) instead of a call.
"""

from __future__ import annotations

from typing import Protocol


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
