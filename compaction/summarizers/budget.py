"""Token budgets: the effective target of a level, and cutting text to a token count."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from core.token_estimate import estimate_tokens

if TYPE_CHECKING:
    from compaction.summarizers.base import SummaryRequest

Estimator = Callable[[str], int]

# The smallest target an aggressive pass aims at; below this a summary says almost nothing.
MIN_AGGRESSIVE_TARGET = 16


def effective_target(request: SummaryRequest) -> int:
    """The token target of this attempt: the request's target, or about half when aggressive."""
    target = max(1, request.target_tokens)
    if request.level == "aggressive":
        return min(target, max(MIN_AGGRESSIVE_TARGET, target // 2))
    return target


def truncate_to_tokens(
    text: str, max_tokens: int, estimator: Estimator = estimate_tokens, marker: str = "..."
) -> str:
    """The longest prefix of `text` (plus `marker` when cut) within `max_tokens`.

    Binary search over the prefix length, so it is exact for any monotonic estimator and
    costs O(log n) estimates. Never splits a code point (Python strings are code points).
    """
    if max_tokens <= 0:
        return ""
    if estimator(text) <= max_tokens:
        return text
    if estimator(marker) > max_tokens:
        marker = ""
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if estimator(text[:middle].rstrip() + marker) <= max_tokens:
            low = middle
        else:
            high = middle - 1
    return text[:low].rstrip() + marker if low else marker
