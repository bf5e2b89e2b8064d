"""The model summarizer: one Messages API call per attempt through the provider layer
(providers/anthropic.py, which uses the `anthropic` SDK with its own retries off).

The provider layer retries 429, 529 and other 5xx with exponential backoff that honours
`retry-after`; here 401/403 become `SummarizerAuthError` at once, and timeouts, connection
failures, other statuses and unusable output become `SummarizerError` so the engine
escalates to the next level. The spend guard and circuit breaker stay with the engine
(compaction/escalation.py), which substitutes the deterministic summarizer when they say
no, so this adapter is built without a guard.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from compaction.summarizers import output, prompts
from compaction.summarizers.analysis import analyze
from compaction.summarizers.base import (
    SummarizerAuthError,
    SummarizerError,
    SummaryRequest,
    SummaryResult,
)
from compaction.summarizers.expand import expand_items, expand_line
from compaction.summarizers.markers import EXPAND_PREFIX
from core.tokens import estimate_tokens
from providers import blocks
from providers.anthropic import AnthropicProvider, make_client
from providers.base import ProviderRequest
from providers.config import ModelSpec
from providers.errors import ProviderAuthError, ProviderError

# Token cap of the expand line appended when the model wrote none.
_EXPAND_TOKENS = 80
_CONTEXT_LIMIT = 200_000  # informational: the summarizer bounds its own prompt


class AnthropicSummarizer:
    name = "anthropic"

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
        self.model = model
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
            prompts.MAX_MAX_TOKENS,
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_BASE_URL",
        )
        self.provider = AnthropicProvider(
            self.spec,
            client=self.client,
            timeout=timeout,
            max_retries=self.max_retries,
            sleep=sleep,
        )

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        params = prompts.message_params(request, self.model)
        call = ProviderRequest(
            model=self.spec,
            system=params["system"],
            messages=[blocks.message("user", params["messages"][0]["content"])],
            tools=[],
            max_output_tokens=params["max_tokens"],
            purpose="summary",
            conversation_id=request.conversation_id,
        )
        try:
            response = self.provider.complete(call)
        except ProviderAuthError as error:
            raise SummarizerAuthError(str(error)) from error
        except ProviderError as error:
            raise SummarizerError(str(error)) from error
        if response.outcome["code"] == "refusal":
            raise SummarizerError("the model refused to summarize")
        text = output.strip_reasoning(output.response_text(response.blocks))
        body, named = output.split_expand_line(text)
        if not body:
            raise SummarizerError("empty output")
        content = output.join_expand_line(body, named or _derived_expand_items(request))
        return SummaryResult(
            content=content,
            model=response.model or self.model,
            input_tokens=response.usage["input_tokens"],
            output_tokens=response.usage["output_tokens"],
        )

    def close(self) -> None:
        self.client.close()


def _derived_expand_items(request: SummaryRequest) -> str:
    """What the sources hold that a summary leaves out, for a model that named nothing."""
    line = expand_line(
        expand_items(request, analyze(request, estimate_tokens)), _EXPAND_TOKENS, estimate_tokens
    )
    return line.removeprefix(EXPAND_PREFIX).strip()
