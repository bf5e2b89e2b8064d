"""Summarizers: turn a run of messages or summaries into one summary text.

The compaction engine builds a `SummaryRequest`, calls `summarizer.summarize(request)` at
the "normal" then the "aggressive" level, and falls back to `fallback_summary(request)`.
See docs/summarizers.md.

This package's public names, re-exported for callers outside it. The modules inside import
from the module that defines a name, never from here (so none imports its own package).
"""

from compaction.summarizers.anthropic import AnthropicSummarizer
from compaction.summarizers.base import (
    SourceItem,
    Summarizer,
    SummarizerAuthError,
    SummarizerError,
    SummaryRequest,
    SummaryResult,
)
from compaction.summarizers.deterministic import DeterministicSummarizer
from compaction.summarizers.factory import default_summarizer
from compaction.summarizers.fallback import fallback_summary
from compaction.summarizers.render import render_sources

__all__ = [
    "AnthropicSummarizer",
    "DeterministicSummarizer",
    "SourceItem",
    "Summarizer",
    "SummarizerAuthError",
    "SummarizerError",
    "SummaryRequest",
    "SummaryResult",
    "default_summarizer",
    "fallback_summary",
    "render_sources",
]
