"""The default model summarizer: `ModelSummarizer` (compaction/summarizers/model.py) on a
Messages API model built from LCM_SUMMARY_MODEL, ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL,
through providers/anthropic.py (the `anthropic` SDK with its own retries off) and one
client held for the summarizer's life. Errors map as in ModelSummarizer.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from compaction.summarizers.model import ModelSummarizer
from compaction.summarizers.prompts import MAX_MAX_TOKENS
from providers.anthropic import AnthropicProvider, make_client
from providers.config import ModelSpec

_CONTEXT_LIMIT = 200_000  # informational: the summarizer bounds its own prompt


class AnthropicSummarizer(ModelSummarizer):
    def __init__(
        self,
        *,
        model: str,
        timeout: float,
        max_retries: int,
        api_key: str | None = None,
        base_url: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """`api_key` and `base_url` default to ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL;
        `sleep` is injectable so tests do not wait."""
        self.timeout = timeout
        self.max_retries = max(0, max_retries)
        self.sleep = sleep
        self.client = make_client(
            api_key=api_key or os.environ.get("ANTHROPIC_API_KEY"),
            base_url=base_url,
            timeout=timeout,
        )
        self.spec = ModelSpec(
            "summary",
            "anthropic",
            model,
            _CONTEXT_LIMIT,
            MAX_MAX_TOKENS,
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_BASE_URL",
        )
        super().__init__(
            self.spec,
            AnthropicProvider(
                self.spec,
                client=self.client,
                timeout=timeout,
                max_retries=self.max_retries,
                sleep=sleep,
            ),
        )

    def close(self) -> None:
        self.client.close()
