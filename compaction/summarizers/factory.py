"""Choosing the summarizer: the model when an API key is configured, else the offline one."""

from __future__ import annotations

import os

from compaction.summarizers.anthropic import AnthropicSummarizer
from compaction.summarizers.base import Summarizer
from compaction.summarizers.deterministic import DeterministicSummarizer


def default_summarizer(
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    model: str,
    timeout: float,
    max_retries: int,
) -> Summarizer:
    """`AnthropicSummarizer` when `api_key` (or env ANTHROPIC_API_KEY) is set, else
    `DeterministicSummarizer`. `base_url` falls back to env ANTHROPIC_BASE_URL in the SDK."""
    key = api_key or os.environ.get("ANTHROPIC_API_KEY")
    if not key:
        return DeterministicSummarizer()
    return AnthropicSummarizer(
        api_key=key, base_url=base_url, model=model, timeout=timeout, max_retries=max_retries
    )
