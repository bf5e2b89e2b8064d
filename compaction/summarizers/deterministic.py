"""The offline summarizer: extractive, deterministic, within the token target.

It needs no network and no model, so it is the default when no API key is configured,
what the demo and most tests run on, and what an open circuit breaker falls back to.
"""

from __future__ import annotations

from compaction.summarizers.base import SummaryRequest, SummaryResult
from compaction.summarizers.budget import Estimator, effective_target
from compaction.summarizers.compose import compose
from compaction.summarizers.render import render_sources
from core.token_estimate import estimate_tokens


class DeterministicSummarizer:
    """Keeps the sentences that carry decisions, questions, TODOs, errors, paths,
    identifiers, URLs and numbers, labelled with time, speaker and ref; lists the key facts;
    ends with what it compressed away. "aggressive" halves the target and drops sentences
    that carry none of those signals.
    """

    name = "deterministic"

    def __init__(self, *, estimator: Estimator = estimate_tokens) -> None:
        self.estimator = estimator

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        content = compose(
            request,
            target=effective_target(request),
            signal_only=request.level == "aggressive",
            estimator=self.estimator,
        )
        return SummaryResult(
            content=content,
            model="deterministic",
            input_tokens=self.estimator(render_sources(request)),
            output_tokens=self.estimator(content),
        )
