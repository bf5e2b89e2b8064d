"""Three-level escalation: normal, then aggressive, then the deterministic fallback.

A level's output is accepted only if it is non-empty, shorter (in tokens) than the sources
it replaces, and within `CAP_FACTOR` x the level's target. A `SummarizerError` (timeout,
overload after retries, unusable output) fails that level; a `SummarizerAuthError`
propagates: the pass writes nothing and the run reports it. The fallback is at most
`FALLBACK_MAX_TOKENS` and at most half the sources, so a pass always shrinks the context;
when even that is not shorter than the sources (a tiny range), `NoProgress` is raised.

Model calls go through the spend guard and circuit breaker (`compaction.guard`); when
either refuses, the deterministic summarizer stands in and the attempt says so.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from django.conf import settings

from compaction import guard
from compaction.summarizers import (
    DeterministicSummarizer,
    SourceItem,
    Summarizer,
    SummarizerAuthError,
    SummarizerError,
    SummaryRequest,
    fallback_summary,
)
from compaction.summarizers.base import Handles
from compaction.summarizers.budget import effective_target
from compaction.summarizers.fidelity import measure
from compaction.summarizers.gate import GateCriteria, append_missing
from compaction.summarizers.handles import draw_handles
from conversations.models import SummaryLevel
from core.token_estimate import estimate

logger = logging.getLogger("lcm.compaction")

CAP_FACTOR = 1.5
FALLBACK_MAX_TOKENS = 512
DETERMINISTIC = "deterministic"


class NoProgress(Exception):
    """No level produced text shorter than the sources: the pass would not save tokens."""


@dataclass
class Outcome:
    content: str
    token_count: int
    level: str
    model: str
    attempts: list[str] = field(default_factory=list)  # one line per level tried
    path: str = ""  # how the text was made (SummaryFidelity.path)


def _stand_in(summarizer: Summarizer, conversation_id: int | None, attempts: list[str]):
    """The deterministic summarizer when the spend guard or the breaker refuses a model call."""
    if getattr(summarizer, "name", "") == DETERMINISTIC or conversation_id is None:
        return summarizer, False
    provider = summarizer.name
    if guard.circuit_open(provider=provider):
        attempts.append(f"circuit breaker open for {provider}: deterministic summarizer used")
        return DeterministicSummarizer(), True
    if not guard.spend_allowed(conversation_id=conversation_id):
        attempts.append("spend guard: call limit reached, deterministic summarizer used")
        return DeterministicSummarizer(), True
    return summarizer, False


def summarize(
    *,
    summarizer: Summarizer,
    sources: Sequence[SourceItem],
    source_tokens: int,
    depth: int,
    target_tokens: int,
    previous_context: str | None,
    conversation_id: int | None,
    handles: Handles | None = None,
) -> Outcome:
    attempts: list[str] = []
    normal = SummaryRequest(
        sources=sources,
        depth=depth,
        target_tokens=target_tokens,
        level=SummaryLevel.NORMAL.value,
        previous_context=previous_context,
        conversation_id=conversation_id,
        handles=handles,
    )
    aggressive = replace(normal, level=SummaryLevel.AGGRESSIVE.value)
    for level, request in ((SummaryLevel.NORMAL, normal), (SummaryLevel.AGGRESSIVE, aggressive)):
        cap = math.ceil(effective_target(request) * CAP_FACTOR)
        chosen, substituted = _stand_in(summarizer, conversation_id, attempts)
        is_model = getattr(chosen, "name", "") != DETERMINISTIC
        if is_model:
            guard.spend_record(conversation_id=conversation_id, provider=chosen.name)
        try:
            result = chosen.summarize(request)
        except SummarizerAuthError:
            raise
        except SummarizerError as error:
            attempts.append(f"{level}: failed ({error})")
            if is_model:
                guard.circuit_failure(provider=chosen.name, error=str(error))
            continue
        if is_model:
            guard.circuit_success(provider=chosen.name)
        content = result.content.strip()
        tokens = estimate(content)
        problem = _unusable(content, tokens, source_tokens, cap)
        if problem:
            attempts.append(f"{level}: {problem}")
        else:
            suffix = " (stand-in)" if substituted else ""
            attempts.append(f"{level}: accepted, {tokens} tokens{suffix}")
            path = DETERMINISTIC
            if is_model:
                gated = _Gate(chosen, request, source_tokens, cap, attempts)
                content, path = gated.apply(content)
                tokens = estimate(content)
            return Outcome(content, tokens, level.value, result.model, attempts, path)
    content = fallback_summary(aggressive, FALLBACK_MAX_TOKENS, estimator=estimate).strip()
    tokens = estimate(content)
    if not content or tokens >= source_tokens:
        attempts.append(f"fallback: {tokens} tokens is not shorter than {source_tokens}")
        raise NoProgress("; ".join(attempts))
    attempts.append(f"fallback: accepted, {tokens} tokens")
    return Outcome(content, tokens, SummaryLevel.FALLBACK.value, "fallback", attempts, "fallback")


def _unusable(content: str, tokens: int, source_tokens: int, cap: int) -> str:
    """Why a level's text cannot be used, or "" when it can."""
    if not content:
        return "empty output"
    if tokens >= source_tokens:
        return f"{tokens} tokens is not shorter than {source_tokens}"
    if tokens > cap:
        return f"{tokens} tokens is over the cap of {cap}"
    return ""


class _Gate:
    """The fidelity gate on a model summary (docs/compaction.md, "The gate"): below
    LCM_SUMMARY_MIN_FIDELITY of the handles or LCM_SUMMARY_MIN_RELATIONS of the relation
    probes, one more call naming the missing handles and what it did not say (through the
    spend guard and the breaker like any call), the better of the two kept; still short of
    the relations, the deterministic summary replaces it; still short of the handles only,
    the missing handles are appended within the target (summarizers/gate.py)."""

    def __init__(self, summarizer, request, source_tokens: int, cap: int, attempts: list[str]):
        self.summarizer, self.request, self.attempts = summarizer, request, attempts
        self.source_tokens, self.cap = source_tokens, cap
        self.minimum = settings.LCM_SUMMARY_MIN_FIDELITY
        self.handles = request.handles
        if self.handles is None:
            self.handles = draw_handles(request.sources)
        self.criteria = GateCriteria(
            self.minimum, settings.LCM_SUMMARY_MIN_RELATIONS, self.handles, request
        )

    def apply(self, content: str) -> tuple[str, str]:
        verdict = self.criteria.judge(content)
        if verdict.passes:
            return content, "model"
        self.attempts.append(f"gate: {verdict.describe()}")
        path = "model"
        again = self._again(verdict.missing_handles, verdict.missing_relations)
        if again is not None:
            better = self.criteria.judge(again)
            self.attempts.append(f"gate: the retry: {better.describe()}")
            if better.rank > verdict.rank:
                content, verdict, path = again, better, "model_retried"
            if verdict.passes:
                return content, path
        if not verdict.relations_pass:
            deterministic = DeterministicSummarizer().summarize(self.request).content.strip()
            kept = self.criteria.judge(deterministic)
            self.attempts.append(
                f"gate: still loses what happened, replaced by the deterministic summary "
                f"({kept.describe()})"
            )
            return deterministic, "model_replaced"
        target = effective_target(self.request)
        content = append_missing(content, self.handles, target, estimate)
        appended = measure(content, self.handles).score
        self.attempts.append(f"gate: missing handles appended, fidelity {appended:.2f}")
        return content, f"{path}_appended" if path == "model_retried" else "model_appended"

    def _again(self, left: Handles, unsaid: tuple[str, ...]) -> str | None:
        """The retry's text, or None when it was not made or not usable."""
        conversation_id = self.request.conversation_id
        name = self.summarizer.name
        if conversation_id is not None:
            if guard.circuit_open(provider=name) or not guard.spend_allowed(
                conversation_id=conversation_id
            ):
                self.attempts.append("gate: no retry (spend guard or circuit breaker)")
                return None
            guard.spend_record(conversation_id=conversation_id, provider=name)
        try:
            result = self.summarizer.summarize(
                replace(self.request, must_name=left or None, must_say=unsaid or None)
            )
        except SummarizerAuthError:
            raise
        except SummarizerError as error:
            self.attempts.append(f"gate: the retry failed ({error})")
            guard.circuit_failure(provider=name, error=str(error))
            return None
        guard.circuit_success(provider=name)
        text = result.content.strip()
        problem = _unusable(text, estimate(text), self.source_tokens, self.cap)
        if problem:
            self.attempts.append(f"gate: the retry is unusable ({problem})")
            return None
        return text
