"""The last resort of the escalation: a short deterministic summary that always fits.

It is the same extraction as the deterministic summarizer, kept to sentences that carry a
signal, under a marker line, and never longer than half of the sources (so a pass always
shrinks the context) nor than `max_tokens`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from compaction.summarizers.budget import Estimator, truncate_to_tokens
from compaction.summarizers.compose import compose
from compaction.summarizers.markers import FALLBACK_MARKER
from compaction.summarizers.render import render_sources
from core.token_estimate import estimate_tokens

if TYPE_CHECKING:
    from compaction.summarizers.base import SummaryRequest

logger = logging.getLogger(__name__)

# Smallest budget worth writing; sources above about twice this always shrink.
_FLOOR = 24


def fallback_summary(
    request: SummaryRequest, max_tokens: int = 512, *, estimator: Estimator = estimate_tokens
) -> str:
    """At most `max_tokens` tokens, starting with the marker line, and at most 24 tokens or
    half the sources' total, so it is shorter than any sources of more than 24 tokens."""
    budget = max(1, max_tokens)
    source_tokens = sum(estimator(item.content) for item in request.sources)
    if source_tokens:
        budget = min(budget, max(_FLOOR, source_tokens // 2))
    marker = FALLBACK_MARKER + "\n"
    room = budget - estimator(marker)
    if room < 1:
        return truncate_to_tokens(FALLBACK_MARKER, budget, estimator)
    try:
        body = compose(request, target=room, signal_only=True, estimator=estimator)
    except Exception:  # the last resort must still make progress; the bug is logged
        logger.exception("deterministic extraction failed; cutting the rendered sources")
        body = truncate_to_tokens(render_sources(request), room, estimator)
    return truncate_to_tokens(marker + body, budget, estimator)
