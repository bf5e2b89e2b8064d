"""Which adapter serves which provider: `provider_for(spec)`.

The adapters import the shared types from `providers.base`; this table sits above them, so
`base.py` needs none of them. An adapter's module is imported on first use (by dotted path,
as Django names its backends): the `anthropic` and `openai` SDKs take a second or more to
import, and most processes call one provider, or none.
"""

from __future__ import annotations

from django.utils.module_loading import import_string

from providers.base import Provider
from providers.config import ModelSpec

# Keep in step with `providers.config.PROVIDERS` (a test checks that both name the same).
ADAPTERS = {
    "offline": "providers.offline.OfflineProvider",
    "anthropic": "providers.anthropic.AnthropicProvider",
    "openai": "providers.openai.OpenAIProvider",
    "openai_chat": "providers.openai_chat.OpenAIChatProvider",
}


def provider_for(spec: ModelSpec, **kwargs) -> Provider:
    """The adapter for `spec.provider`. Keyword arguments (e.g. `sleep`, `max_retries`,
    `timeout`, `guard`) go to the adapter; the key is read from the environment per call."""
    path = ADAPTERS.get(spec.provider)
    if path is None:
        raise ValueError(f"no adapter for provider {spec.provider!r}")
    return import_string(path)(spec, **kwargs)
