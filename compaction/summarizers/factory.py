"""Choosing the summarizer: a configured model when LCM_SUMMARY_PROVIDER_MODEL names one,
else the Anthropic model when an API key is set, else the offline one."""

from __future__ import annotations

import os

from compaction.summarizers.anthropic import AnthropicSummarizer
from compaction.summarizers.base import Summarizer
from compaction.summarizers.deterministic import DeterministicSummarizer
from compaction.summarizers.model import MisconfiguredSummarizer, ModelSummarizer
from providers.config import model_get
from providers.errors import UnknownModel
from providers.registry import provider_for


def default_summarizer(
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    model: str,
    timeout: float,
    max_retries: int,
    provider_model: str = "",
) -> Summarizer:
    """With `provider_model` (the name of a configured model, providers/config.py): that
    model through `provider_for` (`DeterministicSummarizer` for the `offline` model).
    Otherwise `AnthropicSummarizer` on `model` when `api_key` (or env ANTHROPIC_API_KEY) is
    set, else `DeterministicSummarizer`. `base_url` falls back to env ANTHROPIC_BASE_URL."""
    if provider_model:
        return configured_summarizer(provider_model, timeout=timeout, max_retries=max_retries)
    key = api_key or os.environ.get("ANTHROPIC_API_KEY")
    if not key:
        return DeterministicSummarizer()
    return AnthropicSummarizer(
        api_key=key, base_url=base_url, model=model, timeout=timeout, max_retries=max_retries
    )


def configured_summarizer(name: str, *, timeout: float, max_retries: int, **kwargs) -> Summarizer:
    """The summarizer on configured model `name`. An unknown name gives a summarizer that
    fails every call with the reason (the run fails with `summarizer_auth`); a missing key
    is reported the same way by the call, naming the variable (MissingKey)."""
    try:
        spec = model_get(name)
    except UnknownModel as error:
        return MisconfiguredSummarizer(f"LCM_SUMMARY_PROVIDER_MODEL: {error}")
    if spec.provider == "offline":
        return DeterministicSummarizer()
    provider = provider_for(spec, timeout=timeout, max_retries=max(0, max_retries), **kwargs)
    return ModelSummarizer(spec, provider)
