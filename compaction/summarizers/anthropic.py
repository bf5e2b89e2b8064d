"""The model summarizer: one Messages API call per attempt through the `anthropic` SDK.

The SDK's own retries are off (`max_retries=0`) so this module decides: 429, 529 and other
5xx are retried with exponential backoff that honours `retry-after`; 401/403 raise
`SummarizerAuthError` at once; timeouts, connection failures, other statuses and unusable
output raise `SummarizerError` so the engine escalates to the next level.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import anthropic

from compaction.summarizers import output, prompts, retry
from compaction.summarizers.analysis import analyze
from compaction.summarizers.base import (
    SummarizerAuthError,
    SummarizerError,
    SummaryRequest,
    SummaryResult,
)
from compaction.summarizers.expand import expand_items, expand_line
from compaction.summarizers.markers import EXPAND_PREFIX
from conversations.tokens import estimate_tokens

logger = logging.getLogger(__name__)

# Token cap of the expand line appended when the model wrote none.
_EXPAND_TOKENS = 80


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
        """`api_key` and `base_url` default to ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL
        (read by the SDK); `sleep` is injectable so tests do not wait."""
        self.model = model
        self.timeout = timeout
        self.max_retries = max(0, max_retries)
        self.sleep = sleep
        self.client = anthropic.Anthropic(
            api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0
        )

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        response = self._create(
            prompts.message_params(request, self.model), request.conversation_id
        )
        if response.stop_reason == "refusal":
            raise SummarizerError("the model refused to summarize")
        text = output.strip_reasoning(output.response_text(response.content))
        body, named = output.split_expand_line(text)
        if not body:
            raise SummarizerError("empty output")
        content = output.join_expand_line(body, named or _derived_expand_items(request))
        usage = response.usage
        return SummaryResult(
            content=content,
            model=response.model or self.model,
            input_tokens=getattr(usage, "input_tokens", None),
            output_tokens=getattr(usage, "output_tokens", None),
        )

    def close(self) -> None:
        self.client.close()

    def _create(self, params: dict, conversation_id: int | None) -> anthropic.types.Message:
        for attempt in range(self.max_retries + 1):
            try:
                return self.client.messages.create(**params)
            except (anthropic.AuthenticationError, anthropic.PermissionDeniedError) as error:
                raise SummarizerAuthError(_describe(error)) from error
            except anthropic.APITimeoutError as error:
                raise SummarizerError(f"timed out after {self.timeout:g} s") from error
            except anthropic.APIConnectionError as error:
                raise SummarizerError(f"connection failed: {error}") from error
            except anthropic.APIStatusError as error:
                if not retry.is_retryable(error.status_code) or attempt == self.max_retries:
                    raise SummarizerError(_describe(error)) from error
                wait = retry.backoff_seconds(
                    attempt, retry.retry_after_seconds(error.response.headers)
                )
                logger.warning(
                    "summarizer call failed, retrying",
                    extra={
                        "conversation_id": conversation_id,
                        "status": error.status_code,
                        "attempt": attempt + 1,
                        "wait_seconds": wait,
                    },
                )
                self.sleep(wait)
            except anthropic.AnthropicError as error:
                raise SummarizerError(f"provider error: {error}") from error
        raise AssertionError("unreachable")  # the loop returns or raises


def _describe(error: anthropic.APIStatusError) -> str:
    body = error.body if isinstance(error.body, dict) else {}
    detail = body.get("error", {}) if isinstance(body.get("error"), dict) else {}
    kind = detail.get("type", "error")
    message = detail.get("message") or error.message
    return f"HTTP {error.status_code} {kind}: {message}"


def _derived_expand_items(request: SummaryRequest) -> str:
    """What the sources hold that a summary leaves out, for a model that named nothing."""
    line = expand_line(
        expand_items(request, analyze(request, estimate_tokens)), _EXPAND_TOKENS, estimate_tokens
    )
    return line.removeprefix(EXPAND_PREFIX).strip()
