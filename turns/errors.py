"""Domain errors of the turn engine, all `LcmError`s (so the API answers them as 4xx)."""

from __future__ import annotations

from core.api.errors import Conflict, InvalidInput, LcmError


class ContextTooLarge(LcmError):
    """The assembled context does not fit the model even after every shrink step."""

    status = 422
    code = "context_too_large"


class TurnInProgress(Conflict):
    """Input gating (SRD 6.2): the branch's previous turn has not finalized its answer."""

    def __init__(self, turn_id: str, phase: str, retry_after: float = 1.0):
        super().__init__(
            f"the previous turn on this branch ({turn_id}) is still {phase}; "
            "send the next message once its answer is finalized",
            retry_after=retry_after,
            code="turn_in_progress",
            extra={"retry_after_ms": int(retry_after * 1000), "turn_id": turn_id, "phase": phase},
        )


class TurnNotCommitted(InvalidInput):
    """The request is well formed but does not fit the turn's state (not committed yet):
    a 409, as the schema documents state conflicts (a 400 would say the request is bad)."""

    status = 409
    code = "turn_not_committed"


class PhaseConflict(Conflict):
    """A compare-and-set phase transition lost: another process moved the turn first."""

    def __init__(self, turn_id: str, expected: str, actual: str):
        super().__init__(
            f"turn {turn_id} is {actual}, not {expected}",
            retry_after=0.5,
            code="phase_conflict",
            extra={"turn_id": turn_id, "expected": expected, "phase": actual},
        )
