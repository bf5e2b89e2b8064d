"""The summarizer model for text files, when one is configured: the configured model named
by LCM_SUMMARY_PROVIDER_MODEL (any provider, through `providers.registry.provider_for`),
else LCM_SUMMARY_MODEL on Anthropic when ANTHROPIC_API_KEY is set.

A plug-in for `explore(..., summarize_text=...)`: one focused call through the provider
layer, made before the ingest transaction opens (never under a lock). Any failure (an
unknown model, a missing key, a provider error) is logged naming the cause and falls back
to the deterministic text summary (the explorer catches it).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from django.conf import settings

PROMPT = (
    "Summarize this document in 200-300 words. Include: what the document is about; key "
    "sections or topics covered; important names, dates and numbers; the document's "
    "structure (chapters, sections). Do not reproduce the document content verbatim."
)
# The model reads the beginning and the end of a very long text, not all of it.
_HEAD_CHARS = 150_000
_TAIL_CHARS = 50_000

logger = logging.getLogger("lcm.largefiles")


def _excerpt(text: str) -> str:
    if len(text) <= _HEAD_CHARS + _TAIL_CHARS:
        return text
    cut = len(text) - _HEAD_CHARS - _TAIL_CHARS
    return f"{text[:_HEAD_CHARS]}\n\n[... {cut:,} characters omitted ...]\n\n{text[-_TAIL_CHARS:]}"


def text_summarizer() -> Callable[[str, int], str] | None:
    """A `summarize_text(text, max_tokens)` using the configured model, or None (the
    deterministic summary) when there is none or it is the `offline` model."""
    name = settings.LCM_SUMMARY_PROVIDER_MODEL
    if name == "offline" or not (name or os.environ.get("ANTHROPIC_API_KEY")):
        return None

    def summarize_text(text: str, max_tokens: int) -> str:
        from providers import blocks
        from providers.base import ProviderRequest
        from providers.errors import ModelConfigError
        from providers.registry import provider_for

        try:
            spec = _spec(name, max(64, max_tokens))
            provider = provider_for(
                spec,
                timeout=settings.LCM_SUMMARY_TIMEOUT_SECONDS,
                max_retries=settings.LCM_SUMMARY_MAX_RETRIES,
            )
            reply = provider.complete(
                ProviderRequest(
                    model=spec,
                    system=PROMPT,
                    messages=[blocks.message("user", f"<document>\n{_excerpt(text)}\n</document>")],
                    tools=[],
                    max_output_tokens=min(max(64, max_tokens), spec.max_output_tokens),
                    purpose="summary",
                )
            )
        except ModelConfigError as error:
            logger.warning("large-file text summary model unusable: %s", error.message)
            raise
        return blocks.rendered_text(reply.blocks)

    return summarize_text


def _spec(name: str, max_tokens: int):
    """The configured model `name`, or LCM_SUMMARY_MODEL on Anthropic when `name` is empty.
    Raises UnknownModel / MissingKey (naming the setting's value or the key variable)."""
    from providers.config import ModelSpec, model_get, require_key

    if not name:
        return ModelSpec(
            "file-summary",
            "anthropic",
            settings.LCM_SUMMARY_MODEL,
            200_000,
            max_tokens,
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_BASE_URL",
        )
    spec = model_get(name)
    require_key(spec)
    return spec
