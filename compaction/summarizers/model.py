"""The model summarizer: one non-streaming call per attempt through the provider layer, on
any configured model (`providers.registry.provider_for`: anthropic, openai, openai_chat).

The provider layer retries 429, 529 and other 5xx with exponential backoff that honours
`retry-after`; here 401/403 and a missing key (`MissingKey`, which names the variable)
become `SummarizerAuthError` at once, and timeouts, connection failures, other statuses and
unusable output become `SummarizerError` so the engine escalates to the next level. The
spend guard and circuit breaker stay with the engine (compaction/escalation.py), which
substitutes the deterministic summarizer when they say no, so this adapter is built
without a guard. `AnthropicSummarizer` (compaction/summarizers/anthropic.py) is this class
on a model built from LCM_SUMMARY_MODEL and ANTHROPIC_API_KEY, the default.
"""

from __future__ import annotations

from compaction.summarizers.analysis import analyze
from compaction.summarizers.base import (
    SummarizerAuthError,
    SummarizerError,
    SummaryRequest,
    SummaryResult,
)
from compaction.summarizers.expand import expand_items, expand_line
from compaction.summarizers.markers import EXPAND_PREFIX
from compaction.summarizers.output import (
    join_expand_line,
    response_text,
    split_expand_line,
    strip_reasoning,
)
from compaction.summarizers.prompts import message_params
from compaction.summarizers.receipt_sources import receipt_sources
from core.token_estimate import estimate_tokens
from providers import blocks
from providers.base import Provider, ProviderRequest
from providers.config import ModelSpec
from providers.errors import ModelConfigError, ProviderAuthError, ProviderError
from receipts.context import call_context

# Token cap of the expand line appended when the model wrote none.
_EXPAND_TOKENS = 80


class ModelSummarizer:
    """Summaries from `provider` (an adapter for `spec`). `name` is the provider's name:
    the circuit breaker is kept per provider."""

    def __init__(self, spec: ModelSpec, provider: Provider) -> None:
        self.spec = spec
        self.provider = provider
        self.model = spec.model_id
        self.name = spec.provider

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        params = message_params(request, self.model)
        call = ProviderRequest(
            model=self.spec,
            system=params["system"],
            messages=[blocks.message("user", params["messages"][0]["content"])],
            tools=[],
            max_output_tokens=min(params["max_tokens"], self.spec.max_output_tokens),
            purpose="summary",
            conversation_id=request.conversation_id,
        )
        try:
            with call_context(**receipt_sources(request)):
                response = self.provider.complete(call)
        except (ProviderAuthError, ModelConfigError) as error:
            raise SummarizerAuthError(str(error)) from error
        except ProviderError as error:
            raise SummarizerError(str(error)) from error
        if response.outcome["code"] == "refusal":
            raise SummarizerError("the model refused to summarize")
        text = strip_reasoning(response_text(response.blocks))
        body, named = split_expand_line(text)
        if not body:
            raise SummarizerError("empty output")
        content = join_expand_line(body, named or _derived_expand_items(request))
        return SummaryResult(
            content=content,
            model=response.model or self.model,
            input_tokens=response.usage["input_tokens"],
            output_tokens=response.usage["output_tokens"],
        )

    def close(self) -> None:
        client = getattr(self.provider, "client", None)
        if client is not None:
            client.close()


class MisconfiguredSummarizer:
    """Stands for a summarizer model that cannot be used (an unknown name in
    LCM_SUMMARY_PROVIDER_MODEL): every call fails as an authentication failure would, so
    the compaction run fails with `summarizer_auth` and the reason, and writes nothing."""

    def __init__(self, reason: str, name: str = "misconfigured") -> None:
        self.reason = reason
        self.name = name
        self.model = name

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        raise SummarizerAuthError(self.reason)


def _derived_expand_items(request: SummaryRequest) -> str:
    """What the sources hold that a summary leaves out, for a model that named nothing."""
    line = expand_line(
        expand_items(request, analyze(request, estimate_tokens)), _EXPAND_TOKENS, estimate_tokens
    )
    return line.removeprefix(EXPAND_PREFIX).strip()
